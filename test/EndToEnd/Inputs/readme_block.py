"""Prints the first ```sh block under the README heading "## TITLE", as it
stands, so that a test runs the commands the README shows.

  readme_block.py README.md "Train a model on your data"
"""
import sys

lines = open(sys.argv[1]).read().split("\n")
start = lines.index("## " + sys.argv[2])
end = next((i for i in range(start + 1, len(lines))
            if lines[i].startswith("## ")), len(lines))
fence = lines.index("```sh", start, end)
close = lines.index("```", fence + 1, end)
print("\n".join(lines[fence + 1:close]))
