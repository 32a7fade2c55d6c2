"""Synthetic "find the target" scenes: a small striped figure hidden among lookalikes and clutter.

Pure numpy + Pillow, no TensorFlow. Every image is a function of (seed, split, index) alone, so a
dataset is reproducible and adding images never changes the ones before them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

RED = (206, 32, 40)
WHITE = (245, 245, 240)
JEANS = (40, 70, 160)
SKIN_TONES = [(241, 194, 160), (224, 172, 130), (198, 134, 98), (141, 85, 54), (255, 219, 190)]
PALETTE = [
    (206, 32, 40),
    (245, 245, 240),
    (40, 70, 160),
    (240, 200, 30),
    (20, 20, 20),
    (30, 140, 60),
    (120, 60, 160),
    (240, 120, 30),
    (90, 170, 220),
    (150, 90, 50),
    (230, 120, 170),
    (128, 128, 128),
]
# Colour pairs a lookalike may wear instead of the target's red and white.
LOOKALIKE_STRIPES = [
    ((240, 200, 30), (20, 20, 20)),  # yellow/black
    ((206, 32, 40), (240, 200, 30)),  # red/yellow
    ((230, 120, 170), (245, 245, 240)),  # pink/white
    ((40, 70, 160), (245, 245, 240)),  # blue/white
    ((206, 32, 40), (20, 20, 20)),  # red/black
    ((240, 120, 30), (245, 245, 240)),  # orange/white
]
TARGET_FEATURES = ("stripes", "hat", "legs")


# Smallest figure whose parts all fit: hat 2 + head 3 + torso 4 + legs 1 pixels (small images scale below it).
MIN_FIGURE_HEIGHT_PX = 10


@dataclass(frozen=True)
class Difficulty:
    """How hard the target is to find: its size, and how many lookalikes and how much clutter surround it."""

    name: str
    target_height: tuple[int, int]  # pixels, at a 256 px image
    distractors: tuple[int, int]
    clutter: tuple[int, int]
    shared_feature_weights: tuple[float, float, float]  # P(a lookalike shares 0, 1 or 2 target features)
    striped_clutter: float  # fraction of clutter drawn in red/white stripes


DIFFICULTIES = {
    "easy": Difficulty("easy", (28, 40), (2, 4), (10, 20), (0.7, 0.3, 0.0), 0.0),
    "medium": Difficulty("medium", (20, 30), (5, 9), (25, 45), (0.3, 0.5, 0.2), 0.1),
    "hard": Difficulty("hard", (12, 22), (12, 18), (50, 80), (0.05, 0.35, 0.6), 0.25),
}


@dataclass(frozen=True)
class Figure:
    stripes: tuple[tuple[int, int, int], tuple[int, int, int]]
    hat: str  # "bobble" (the target's red/white hat), "cap", or "none"
    hat_color: tuple[int, int, int]
    legs: tuple[int, int, int]
    skin: tuple[int, int, int]
    height: int


@dataclass(frozen=True)
class Scene:
    image: np.ndarray  # uint8, H x W x 3
    boxes: list[tuple[float, float, float, float]]  # target boxes, (ymin, xmin, ymax, xmax) in pixels


def scene_rng(seed: int, split: str, index: int) -> np.random.Generator:
    split_code = sum(ord(c) * 31**i for i, c in enumerate(split)) % (2**31)
    return np.random.default_rng([seed, split_code, index])


def make_scene(rng: np.random.Generator, size: int, difficulty: Difficulty) -> Scene:
    """One scene with exactly one target figure."""
    scale = size / 256.0
    image = _background(rng, size)
    draw = ImageDraw.Draw(image)
    n_clutter = int(rng.integers(*difficulty.clutter, endpoint=True))
    clutter_under = n_clutter * 4 // 5
    for _ in range(clutter_under):
        _clutter_shape(rng, draw, size, scale, difficulty.striped_clutter)

    occupied: list[tuple[float, float, float, float]] = []
    target_height = max(
        MIN_FIGURE_HEIGHT_PX, round(rng.integers(*difficulty.target_height, endpoint=True) * scale)
    )
    target = Figure((RED, WHITE), "bobble", RED, JEANS, _pick(rng, SKIN_TONES), target_height)
    target_box = _place(rng, size, target_height, occupied)
    n_distractors = int(rng.integers(*difficulty.distractors, endpoint=True))
    figures = [(target, target_box)]
    for _ in range(n_distractors):
        height = max(
            MIN_FIGURE_HEIGHT_PX,
            round(rng.integers(*difficulty.target_height, endpoint=True) * scale * rng.uniform(0.85, 1.2)),
        )
        figures.append((_lookalike(rng, height, difficulty), _place(rng, size, height, occupied)))
    for index in rng.permutation(len(figures)):
        figure, box = figures[index]
        _draw_figure(draw, figure, box)

    for _ in range(n_clutter - clutter_under):
        _clutter_shape(rng, draw, size, scale, difficulty.striped_clutter, avoid=target_box)
    pixels = np.asarray(image, dtype=np.int16)
    pixels = pixels + rng.normal(0.0, 6.0, size=pixels.shape).round().astype(np.int16)
    return Scene(np.clip(pixels, 0, 255).astype(np.uint8), [target_box])


def _pick(rng: np.random.Generator, items: list):
    return items[int(rng.integers(len(items)))]


def _background(rng: np.random.Generator, size: int) -> Image.Image:
    coarse = rng.integers(90, 230, size=(6, 6, 3)).astype(np.uint8)
    smooth = Image.fromarray(coarse).resize((size, size), Image.BILINEAR)
    fine = rng.integers(-25, 25, size=(size // 4, size // 4, 3)).astype(np.int16)
    fine_up = np.kron(fine, np.ones((4, 4, 1), dtype=np.int16))[:size, :size]
    pixels = np.clip(np.asarray(smooth, dtype=np.int16) + fine_up, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels)


def _clutter_shape(
    rng: np.random.Generator,
    draw: ImageDraw.ImageDraw,
    size: int,
    scale: float,
    striped_fraction: float,
    avoid: tuple[float, float, float, float] | None = None,
) -> None:
    for _ in range(10):
        w, h = (rng.integers(4, 34, size=2) * scale).astype(int) + 1
        x, y = rng.integers(-8, size - 4, size=2)
        if avoid is None or not _overlaps((y, x, y + h, x + w), avoid, margin=2):
            break
    else:
        return
    color = _pick(rng, PALETTE)
    kind = rng.random()
    if rng.random() < striped_fraction:
        _stripes(draw, (x, y, x + w, y + h), (RED, WHITE), max(1, round(2 * scale)))
    elif kind < 0.4:
        draw.ellipse((x, y, x + w, y + h), fill=color)
    elif kind < 0.75:
        draw.rectangle((x, y, x + w, y + h), fill=color)
    else:
        points = [(int(x + rng.integers(0, w + 1)), int(y + rng.integers(0, h + 1))) for _ in range(3)]
        draw.polygon(points, fill=color)


def _lookalike(rng: np.random.Generator, height: int, difficulty: Difficulty) -> Figure:
    shared_count = int(rng.choice(3, p=np.asarray(difficulty.shared_feature_weights)))
    shared = set(rng.choice(TARGET_FEATURES, size=shared_count, replace=False).tolist())
    stripes = (RED, WHITE) if "stripes" in shared else _pick(rng, LOOKALIKE_STRIPES)
    if "hat" in shared:
        hat, hat_color = "bobble", RED
    else:
        hat = "none" if rng.random() < 0.5 else "cap"
        hat_color = _pick(rng, [c for c in PALETTE if c != RED])
    legs = JEANS if "legs" in shared else _pick(rng, [c for c in PALETTE if c != JEANS])
    return Figure(stripes, hat, hat_color, legs, _pick(rng, SKIN_TONES), height)


def _place(
    rng: np.random.Generator, size: int, height: int, occupied: list[tuple[float, float, float, float]]
) -> tuple[float, float, float, float]:
    width = _figure_width(height)
    box = (0.0, 0.0, float(height), float(width))
    for _ in range(50):
        y = int(rng.integers(1, size - height - 1))
        x = int(rng.integers(1, size - width - 1))
        box = (float(y), float(x), float(y + height), float(x + width))
        if not any(_overlaps(box, other, margin=1) for other in occupied):
            break
    occupied.append(box)
    return box


def _figure_width(height: int) -> int:
    return max(5, round(height * 0.45))


def _overlaps(a: tuple[float, ...], b: tuple[float, ...], margin: float) -> bool:
    return not (
        a[2] + margin <= b[0] or b[2] + margin <= a[0] or a[3] + margin <= b[1] or b[3] + margin <= a[1]
    )


def _draw_figure(draw: ImageDraw.ImageDraw, figure: Figure, box: tuple[float, float, float, float]) -> None:
    top, left, bottom, right = (int(v) for v in box)
    height, width = bottom - top, right - left
    hat_h = max(2, round(height * 0.16))
    head_h = max(3, round(height * 0.2))
    torso_h = max(4, round(height * 0.32))
    head_top = top + hat_h
    torso_top = head_top + head_h
    legs_top = torso_top + torso_h
    head_w = max(3, round(width * 0.55))
    head_left = left + (width - head_w) // 2
    draw.ellipse((head_left, head_top, head_left + head_w - 1, torso_top), fill=figure.skin)
    if height >= 16:
        eye_y = head_top + head_h // 2 - 1
        draw.line((head_left, eye_y, head_left + head_w - 1, eye_y), fill=(30, 30, 30))
    if figure.hat == "bobble":
        _stripes(draw, (head_left, top + hat_h // 2, head_left + head_w - 1, head_top), (RED, WHITE), 1)
        bobble = max(1, hat_h // 2)
        cx = head_left + head_w // 2
        draw.ellipse((cx - bobble, top, cx + bobble, top + bobble * 2 - 1), fill=WHITE)
    elif figure.hat == "cap":
        draw.rectangle((head_left - 1, top + hat_h // 2, head_left + head_w, head_top), fill=figure.hat_color)
    stripe = max(1, round(height / 14))
    _stripes(draw, (left, torso_top, right - 1, legs_top - 1), figure.stripes, stripe)
    gap = max(1, width // 6)
    leg_w = (width - gap) // 2
    draw.rectangle((left, legs_top, left + leg_w - 1, bottom - 1), fill=figure.legs)
    draw.rectangle((right - leg_w, legs_top, right - 1, bottom - 1), fill=figure.legs)


def _stripes(
    draw: ImageDraw.ImageDraw,
    rect: tuple[int, int, int, int],
    colors: tuple[tuple[int, int, int], tuple[int, int, int]],
    thickness: int,
) -> None:
    x0, y0, x1, y1 = rect
    for row, y in enumerate(range(int(y0), int(y1) + 1, thickness)):
        draw.rectangle((x0, y, x1, min(int(y1), y + thickness - 1)), fill=colors[row % 2])
