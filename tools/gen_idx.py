#!/usr/bin/env python3
"""Writes a synthetic MNIST-style IDX pair (digit-like blobs) for
`reprise train --data IMAGES --labels LABELS`; no download needed.

usage: tools/gen_idx.py IMAGES LABELS [N] [SEED]

Each class 0..9 is a fixed set of 3 strokes (Gaussian blobs at
class-specific places on a 28x28 grid); every sample moves the whole
digit by up to 2 pixels, jitters each stroke and adds noise, so the classes
overlap a little and need more than a linear model."""
import random
import struct
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    images, labels = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    shape = random.Random(42)  # the classes' strokes: fixed
    strokes = [[(shape.uniform(7, 21), shape.uniform(7, 21), shape.uniform(2, 4))
                for _ in range(3)] for _ in range(10)]
    pix = bytearray()
    labs = bytearray()
    for _ in range(n):
        c = rng.randrange(10)
        dx, dy = rng.uniform(-2, 2), rng.uniform(-2, 2)
        blobs = [(x + dx + rng.gauss(0, 1), y + dy + rng.gauss(0, 1), s)
                 for x, y, s in strokes[c]]
        for r in range(28):
            for q in range(28):
                v = sum(255 * 2.718281828 ** (-((q - x) ** 2 + (r - y) ** 2)
                                                / (2 * s * s))
                        for x, y, s in blobs) + rng.gauss(0, 20)
                pix.append(max(0, min(255, int(v))))
        labs.append(c)
    with open(images, "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, n, 28, 28) + pix)
    with open(labels, "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + labs)


main()
