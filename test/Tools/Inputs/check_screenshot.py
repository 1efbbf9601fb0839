"""Checks that a screenshot of a report is not blank: enough ink, several
colours, and the report's own colours among them -- the Gantt chart's
forward and backward, or with --training the legends of the training
curves (train, validation, learning rate, gradient norm, measured and
simulated throughput), which the top of a run's report shows."""
import sys

from PIL import Image

image = Image.open(sys.argv[1]).convert("RGB")
training = "--training" in sys.argv[2:]
pixels = list(image.getdata())
colours = set(pixels)
ink = sum(1 for p in pixels if p != (255, 255, 255)) / len(pixels)
assert ink > 0.02, f"only {ink:.1%} of the page is not white"
assert len(colours) > 10, f"only {len(colours)} colours"


def rgb(hex_colour):
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


if training:
    wanted = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
              "#9c755f"]
    missing = [c for c in wanted if rgb(c) not in colours]
    assert not missing, f"training colours missing: {missing}"
    what = "training colours present"
else:
    assert rgb("#4e79a7") in colours and rgb("#e15759") in colours, \
        "Gantt colours missing"
    what = "plan colours present"
print(f"screenshot {image.width}x{image.height}: not blank ({len(colours)} "
      f"colours, {ink * 100:.1f}% ink), {what}")
