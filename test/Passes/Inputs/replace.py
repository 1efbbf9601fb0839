"""replace.py IN OUT OLD NEW: copy IN to OUT with the one occurrence of OLD
replaced by NEW; fails when OLD does not occur exactly once (so a test that
edits IR notices when the IR it edits changes)."""
import sys

source, target, old, new = sys.argv[1:5]
text = open(source).read()
count = text.count(old)
if count != 1:
    sys.exit(f"replace.py: '{old}' occurs {count} times in {source}")
open(target, "w").write(text.replace(old, new))
