#!/usr/bin/env python3
"""Draws mla-bench's table as an SVG bar chart of the fraction of the
measured ceiling each shape reaches (copy bandwidth for memory-bound
kernels, the bf16 matmul rate for compute-bound ones), with the targets
as dashed lines. Standard library only.

    python3 scripts/plot-bench.py bench.log docs/plots/h100-fraction-of-ceiling.svg
"""
import re
import sys
from html import escape

ROW = re.compile(r"^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%$")


def groups(lines):
    """(title, [(shape, fraction %)], target %) per kernel variant."""
    section, variant, out = "", "", []
    for line in lines:
        line = line.rstrip()
        if line.startswith("== "):
            section = line.strip("= ").split(":")[0]
            continue
        m = re.match(r"\s+compiled (.+?) for (\S+) in", line)
        if m:
            variant = m.group(1)
            out.append([f"{variant} ({m.group(2)})", [], None])
            continue
        m = ROW.match(line)
        if not m or not out:
            continue
        shape = m.group(1)
        copy, mm = float(m.group(4)), float(m.group(6))
        compute_bound = section.startswith("prefill") or (
            section.startswith("decode") and shape.startswith("128 "))
        if compute_bound:
            fraction, target = mm, 80 if section.startswith("decode") else 75
        else:
            fraction = copy
            small_batch = section.startswith("decode") and re.match(
                r"\d+ x [14] x", shape)
            target = 75 if small_batch else (90 if section.startswith("decode") else 85)
        out[-1][1].append((shape, fraction, target))
    return out


def svg(data, title):
    bar_h, gap, left, width = 14, 3, 230, 520
    rows = sum(len(g[1]) + 2 for g in data)
    height = 40 + rows * (bar_h + gap)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" '
             f'height="{height}" font-family="sans-serif" font-size="11">',
             f'<text x="10" y="20" font-size="14">{escape(title)}</text>']
    y = 40
    scale = width / 100.0
    for name, shapes, _ in data:
        parts.append(f'<text x="10" y="{y + bar_h - 3}" font-weight="bold">'
                     f'{escape(name)}</text>')
        y += bar_h + gap
        for shape, fraction, target in shapes:
            w = min(fraction, 100) * scale
            color = "#3a7" if fraction >= target else "#d73"
            parts.append(f'<text x="20" y="{y + bar_h - 3}">{escape(shape)}</text>')
            parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" '
                         f'height="{bar_h}" fill="{color}"/>')
            tx = left + target * scale
            parts.append(f'<line x1="{tx:.1f}" y1="{y - 1}" x2="{tx:.1f}" '
                         f'y2="{y + bar_h + 1}" stroke="#000" stroke-dasharray="3,2"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}">'
                         f'{fraction:.1f}%</text>')
            y += bar_h + gap
        y += bar_h + gap
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        lines = f.readlines()
    device = next((l.split(":", 1)[1].strip() for l in lines
                   if l.startswith("device:")), "GPU")
    data = groups(lines)
    if not data:
        sys.exit("no mla-bench rows found in " + sys.argv[1])
    title = (f"Fraction of the measured ceiling, {device} (bars: green at or "
             "above the target, dashed line)")
    with open(sys.argv[2], "w") as f:
        f.write(svg(data, title))


if __name__ == "__main__":
    main()
