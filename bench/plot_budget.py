#!/usr/bin/env python3
"""Draws the CSV of budget_sweep.sh as an SVG line chart (no dependencies):
decode tok/s against the RAM budget, with the hit rate as a second line.
usage: plot_budget.py SWEEP.csv OUT.svg [TITLE]"""
import csv, sys

rows = list(csv.DictReader(open(sys.argv[1])))
title = sys.argv[3] if len(sys.argv) > 3 else 'decode tok/s against the RAM budget'
xs = [float(r['rss_peak_mib']) for r in rows]
ys = [float(r['decode_tok_s']) for r in rows]
hs = [float(r['hit_rate']) for r in rows]
W, H, L, R, T, B = 640, 360, 60, 60, 40, 50
xmax, ymax = max(xs) * 1.05, max(ys) * 1.15
px = lambda x: L + (W - L - R) * x / xmax
py = lambda y: H - B - (H - T - B) * y / ymax
ph = lambda h: H - B - (H - T - B) * h
out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
       '<rect width="100%" height="100%" fill="white"/>',
       '<text x="%d" y="20" font-size="14">%s</text>' % (L, title),
       '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
       '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B),
       '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (W - R, T, W - R, H - B)]
for i in range(6):
    y = ymax * i / 5
    out.append('<text x="%d" y="%.0f" text-anchor="end">%.0f</text>' % (L - 6, py(y) + 4, y))
    out.append('<text x="%d" y="%.0f">%.0f%%</text>' % (W - R + 6, ph(i / 5) + 4, 20 * i))
for i in range(6):
    x = xmax * i / 5
    out.append('<text x="%.0f" y="%d" text-anchor="middle">%.0f</text>' % (px(x), H - B + 16, x))
out.append('<text x="%d" y="%d" text-anchor="middle">peak resident set, MiB</text>' % ((L + W - R) / 2, H - 12))
out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">decode tok/s</text>' % (H / 2, H / 2))
out.append('<text x="%d" y="%d" transform="rotate(90 %d %d)" text-anchor="middle">expert hit rate</text>' % (W - 14, H / 2, W - 14, H / 2))
pts = ' '.join('%.1f,%.1f' % (px(x), py(y)) for x, y in zip(xs, ys))
out.append('<polyline points="%s" fill="none" stroke="#1f5fbf" stroke-width="2"/>' % pts)
pts = ' '.join('%.1f,%.1f' % (px(x), ph(h)) for x, h in zip(xs, hs))
out.append('<polyline points="%s" fill="none" stroke="#bf5f1f" stroke-width="1.5" stroke-dasharray="5,3"/>' % pts)
for x, y in zip(xs, ys):
    out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="#1f5fbf"/>' % (px(x), py(y)))
out.append('<text x="%d" y="%d" fill="#1f5fbf">&#8212; decode tok/s</text>' % (L + 10, T + 14))
out.append('<text x="%d" y="%d" fill="#bf5f1f">- - hit rate</text>' % (L + 130, T + 14))
out.append('</svg>')
open(sys.argv[2], 'w').write('\n'.join(out) + '\n')
