#!/usr/bin/python3
"""Writes the images tests/runtime/image_test.cc decodes, with Pillow (Debian's python3-pil),
independently of troupe's codecs:

  write_images.py DIR

DIR/rgb.png: 5x3 RGB, pixel (y, x) = (40 y + 10 x, 255 - 40 y, 7 x + 3);
DIR/gray16.png: the same size, 16-bit gray, 257 * (40 y + 10 x) (8 bits: 40 y + 10 x);
DIR/rgba.png: the same RGB with alpha 200; DIR/flat.jpg: 16x8, every pixel (200, 100, 50),
quality 95.
"""
import sys

from PIL import Image


def main():
    out = sys.argv[1]
    w, h = 5, 3
    rgb = Image.new("RGB", (w, h))
    gray = Image.new("I;16", (w, h))
    rgba = Image.new("RGBA", (w, h))
    for y in range(h):
        for x in range(w):
            pixel = (40 * y + 10 * x, 255 - 40 * y, 7 * x + 3)
            rgb.putpixel((x, y), pixel)
            rgba.putpixel((x, y), pixel + (200,))
            gray.putpixel((x, y), 257 * (40 * y + 10 * x))
    rgb.save(out + "/rgb.png")
    rgba.save(out + "/rgba.png")
    gray.save(out + "/gray16.png")
    Image.new("RGB", (16, 8), (200, 100, 50)).save(out + "/flat.jpg", quality=95)


if __name__ == "__main__":
    main()
