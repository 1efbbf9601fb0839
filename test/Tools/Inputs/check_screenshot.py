"""Checks that a screenshot of the plan report is not blank: enough ink,
several colours, and the report's forward/backward colours among them."""
import sys

from PIL import Image

image = Image.open(sys.argv[1]).convert("RGB")
pixels = list(image.getdata())
colours = set(pixels)
ink = sum(1 for p in pixels if p != (255, 255, 255)) / len(pixels)
forward, backward = (0x4E, 0x79, 0xA7), (0xE1, 0x57, 0x59)
assert ink > 0.02, f"only {ink:.1%} of the page is not white"
assert len(colours) > 10, f"only {len(colours)} colours"
assert forward in colours and backward in colours, "Gantt colours missing"
print(f"screenshot {image.width}x{image.height}: not blank ({len(colours)} "
      f"colours, {ink * 100:.1f}% ink), plan colours present")
