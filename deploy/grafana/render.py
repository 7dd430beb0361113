#!/usr/bin/env python3
"""Draw the Grafana dashboard's panels from a Prometheus into one PNG (no Grafana needed).

    python3 deploy/grafana/render.py --prometheus http://127.0.0.1:9090 \\
        --out docs/img/dashboard.png --minutes 10

It reads deploy/grafana/keyfire.json, runs every panel's PromQL (`targets[].expr`) through
Prometheus's /api/v1/query_range over the last --minutes (or up to --end), and draws the
panels in the dashboard's own grid (gridPos): titles, legends from legendFormat, the panel's
unit, threshold lines where the panel draws them. Dashboard variables get the values Grafana
would give them: $__interval is the step, $__rate_interval is max($__interval + scrape
interval, 4 × scrape interval) with the scrape interval read from Prometheus's config, and a
query variable such as $topic takes its "All" value. The picture is these panels drawn by
matplotlib, not Grafana's UI. Needs matplotlib (pip install matplotlib) and PyYAML.
"""

import argparse
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402  names in an expression are read as check.py reads them

GRID_COLUMNS = 24
# Inches per grid unit of height: Grafana's rows are 30 px; a bit less keeps the PNG small.
ROW_INCHES = 0.27
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def duration_seconds(text):
    """A Prometheus duration ("15s", "1m30s") in seconds."""
    total = 0.0
    for value, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text or ""):
        total += float(value) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400,
                                 "w": 604800, "y": 31536000}[unit]
    if total <= 0:
        raise ValueError(f"not a duration: {text!r}")
    return total


def prom_duration(seconds):
    return f"{int(seconds * 1000)}ms" if seconds < 1 else f"{int(round(seconds))}s"


def get(base, path, params=None):
    url = base.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        body = json.loads(e.read().decode() or "{}")
    except (urllib.error.URLError, OSError) as e:
        sys.exit(f"cannot reach Prometheus at {base}: {e}")
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]


def scrape_interval(base, fallback):
    """The shortest scrape interval in Prometheus's config (what $__rate_interval builds on)."""
    try:
        config = yaml.safe_load(get(base, "/api/v1/status/config")["yaml"]) or {}
    except (RuntimeError, KeyError, yaml.YAMLError):
        return fallback
    glob = config.get("global", {}).get("scrape_interval", "1m")
    intervals = [duration_seconds(j.get("scrape_interval", glob))
                 for j in config.get("scrape_configs") or []]
    return min(intervals) if intervals else duration_seconds(glob)


def variables(dashboard):
    """Each dashboard variable's value: "All" (allValue, else .*) for one that offers it, else
    its saved current value."""
    out = {}
    for v in dashboard.get("templating", {}).get("list", []):
        if v.get("type") == "datasource":
            continue
        current = (v.get("current") or {}).get("value")
        if v.get("includeAll") or not isinstance(current, str):
            out[v["name"]] = v.get("allValue") or ".*"
        else:
            out[v["name"]] = current
    return out


def substitute(expr, values):
    """Grafana's $name, ${name} and [[name]]; a name that is no variable stays as written
    (as Grafana leaves it), such as $1 in a label_replace."""
    pick = lambda m: values.get(m.group(1), m.group(0))
    expr = re.sub(r"\$\{(\w+)(?::\w+)?\}", pick, expr)
    expr = re.sub(r"\[\[(\w+)\]\]", pick, expr)
    return re.sub(r"\$(\w+)", pick, expr)


def legend(fmt, metric, expr):
    if not fmt or fmt == "__auto":
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")
        return f"{metric.get('__name__', expr)}{{{labels}}}" if labels else metric.get("__name__", expr)
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()


def unit_formatter(unit):
    """A tick formatter for Grafana's units the dashboard uses."""

    def short(v):
        for div, suffix in ((1e9, " B"), (1e6, " M"), (1e3, " K")):
            if abs(v) >= div:
                return f"{v / div:.3g}{suffix}"
        return f"{v:.3g}" if v else "0"

    def seconds(v):
        a = abs(v)
        if a == 0:
            return "0 s"
        if a < 1e-3:
            return f"{v * 1e6:.3g} µs"
        if a < 1:
            return f"{v * 1e3:.3g} ms"
        if a < 60:
            return f"{v:.3g} s"
        if a < 3600:
            return f"{v / 60:.3g} min"
        return f"{v / 3600:.3g} h"

    return {
        "ops": lambda v: short(v) + " ops/s",
        "reqps": lambda v: short(v) + " req/s",
        "s": seconds,
        "ms": lambda v: seconds(v / 1000),
        "percentunit": lambda v: f"{v * 100:.3g}%",
        "percent": lambda v: f"{v:.3g}%",
    }.get(unit, short)


def time_locator(mdates, seconds):
    """Ticks at round times, three to seven across the range."""
    minutes = seconds / 60
    for every in (1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440):
        if minutes / every <= 7:
            break
    if every < 60:
        return mdates.MinuteLocator(byminute=range(0, 60, every), tz=timezone.utc)
    if every < 1440:
        return mdates.HourLocator(byhour=range(0, 24, every // 60), tz=timezone.utc)
    return mdates.DayLocator(tz=timezone.utc)


def fetch_panel(base, panel, values, start, end, step):
    series = []
    for target in panel.get("targets", []):
        if target.get("hide") or not target.get("expr"):
            continue
        expr = substitute(target["expr"], values)
        data = get(base, "/api/v1/query_range",
                   {"query": expr, "start": start, "end": end, "step": step})
        for r in data["result"]:
            ts, vs = [], []
            for t, v in r["values"]:
                # A missing stretch (a node down, a series not yet born) stays a gap, as in
                # Grafana, rather than a line drawn across it.
                if ts and float(t) - ts[-1] > 1.5 * step:
                    ts.append(ts[-1] + step)
                    vs.append(float("nan"))
                ts.append(float(t))
                vs.append(float(v))
            if all(math.isnan(v) for v in vs):
                continue
            series.append((legend(target.get("legendFormat"), r["metric"], expr), ts, vs))
    return series


def panels_of(dashboard):
    """Top-level panels and the panels of collapsed rows, in reading order."""
    out = []
    for p in dashboard.get("panels", []):
        out.append(p)
        out.extend(p.get("panels", []) if p.get("type") == "row" else [])
    return sorted(out, key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"]))


def render(args):
    import matplotlib

    matplotlib.use("Agg")
    # Titles and the caption hold "$" (dashboard variables): text, not math.
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    dashboard = json.loads(Path(args.dashboard).read_text())
    end = args.end if args.end is not None else time.time()
    start = end - args.minutes * 60
    scrape = scrape_interval(args.prometheus, args.scrape_interval)
    # Grafana: $__interval is the range over the panel's data points (about its width in px).
    step = max(scrape, (end - start) / args.points)
    values = variables(dashboard)
    values.update({
        "__interval": prom_duration(step),
        "__interval_ms": str(int(step * 1000)),
        "__rate_interval": prom_duration(max(step + scrape, 4 * scrape)),
        "__range": prom_duration(end - start),
        "__range_s": str(int(end - start)),
    })

    panels = panels_of(dashboard)
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header = 1.6  # grid units for the title and caption
    width_in = args.width / args.dpi
    height_in = (bottom + header) * ROW_INCHES
    fig = plt.figure(figsize=(width_in, height_in), dpi=args.dpi, facecolor="white")
    to_x = lambda gx: gx / GRID_COLUMNS
    to_y = lambda gy: 1 - (gy + header) / (bottom + header)

    when = datetime.fromtimestamp(end, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    fig.text(0.01, 1 - 0.45 / (bottom + header), f"{dashboard.get('title', 'dashboard')}",
             fontsize=15, weight="bold", va="center")
    fig.text(0.01, 1 - 1.15 / (bottom + header),
             f"The panels of {Path(args.dashboard).name} drawn from Prometheus by render.py "
             f"(matplotlib, not Grafana's UI): last {args.minutes:g} min to {when}, step "
             f"{values['__interval']}, $__rate_interval = {values['__rate_interval']}, "
             + ", ".join(f"${k} = {v}" for k, v in variables(dashboard).items()),
             fontsize=9, color="#555555", va="center")

    no_data = []
    for panel in panels:
        g = panel["gridPos"]
        if panel.get("type") == "row":
            fig.text(to_x(g["x"]) + 0.005, to_y(g["y"] + 0.5), panel.get("title", ""),
                     fontsize=12, weight="bold", va="center")
            fig.add_artist(matplotlib.lines.Line2D(
                [0.005, 0.995], [to_y(g["y"] + 0.95)] * 2, color="#cccccc", lw=0.8))
            continue
        series = sorted(fetch_panel(args.prometheus, panel, values, start, end, step),
                        key=lambda s: s[0])
        # The legend goes below the plot, as Grafana's "bottom" placement puts it.
        show_legend = (panel.get("type") == "timeseries" and series and panel.get(
            "options", {}).get("legend", {}).get("showLegend", True))
        ncol = max(1, g["w"] * 3 // 8)
        legend_rows = math.ceil(len(series) / ncol) if show_legend else 0
        pad_x, pad_top = 0.045, 0.95
        pad_bottom = (1.05 if legend_rows else 0.75) + 0.5 * legend_rows
        left = to_x(g["x"]) + pad_x
        w = to_x(g["w"]) - pad_x - 0.008
        top = to_y(g["y"] + pad_top)
        bottom_y = to_y(g["y"] + g["h"] - pad_bottom)
        ax = fig.add_axes([left, bottom_y, w, top - bottom_y])
        fig.text(to_x(g["x"]) + 0.006, to_y(g["y"] + 0.35), panel.get("title", ""),
                 fontsize=10, weight="bold", va="center")
        defaults = panel.get("fieldConfig", {}).get("defaults", {})
        fmt = unit_formatter(defaults.get("unit"))
        for spine in ax.spines.values():
            spine.set_color("#dddddd")
        if not series:
            names = set()
            for t in panel.get("targets", []):
                names |= check.metric_names(t.get("expr") or "")
            no_data.append(f"{panel.get('title')} ({', '.join(sorted(names))})")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, "No data", transform=ax.transAxes, ha="center", va="center",
                    fontsize=12, color="#999999")
            continue
        if panel.get("type") == "stat":
            ax.set_xticks([])
            ax.set_yticks([])
            name, ts, vs = series[0]
            last = next((v for v in reversed(vs) if not math.isnan(v)), float("nan"))
            ax.plot([datetime.fromtimestamp(t, timezone.utc) for t in ts], vs,
                    color="#2ca02c", alpha=0.35, lw=1)
            ax.text(0.5, 0.5, fmt(last).replace(" ops/s", ""), transform=ax.transAxes,
                    ha="center", va="center", fontsize=30, weight="bold", color="#2ca02c")
            continue
        lines = []
        for i, (name, ts, vs) in enumerate(series):
            lines += ax.plot([datetime.fromtimestamp(t, timezone.utc) for t in ts], vs, lw=1.1,
                             color=PALETTE[i % len(PALETTE)], label=name or " ")
        if defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode", "off") != "off":
            for s in defaults.get("thresholds", {}).get("steps", []):
                if s.get("value") is not None:
                    ax.axhline(s["value"], color=s.get("color", "red"), lw=1, ls="--")
        if "min" in defaults or "max" in defaults:
            ax.set_ylim(defaults.get("min"), defaults.get("max"))
        else:
            ax.set_ylim(bottom=min(0, ax.get_ylim()[0]))
        ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _, fmt=fmt: fmt(v)))
        ax.xaxis.set_major_locator(time_locator(mdates, end - start))
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=timezone.utc))
        ax.set_xlim(datetime.fromtimestamp(start, timezone.utc),
                    datetime.fromtimestamp(end, timezone.utc))
        ax.tick_params(labelsize=7, colors="#444444")
        ax.grid(True, color="#eeeeee", lw=0.6)
        if show_legend:
            fig.legend(handles=lines, fontsize=7, loc="lower left", ncol=ncol,
                       bbox_to_anchor=(left - 0.004, to_y(g["y"] + g["h"] - 0.05)),
                       frameon=False, handlelength=1.2, borderpad=0.1, labelspacing=0.25,
                       columnspacing=1.0)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=args.dpi)
    plt.close(fig)
    # A palette of 256 colours keeps the PNG small (a few hundred KB) and looks the same.
    from PIL import Image

    with Image.open(args.out) as img:
        small = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(args.out, optimize=True)
    print(f"wrote {args.out}: {len(panels)} panels, {args.minutes:g} min, step {values['__interval']}")
    if no_data:
        print("no data: " + "; ".join(no_data))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090",
                        help="Prometheus's base URL (default http://127.0.0.1:9090)")
    parser.add_argument("--out", default="dashboard.png", help="the PNG to write")
    parser.add_argument("--minutes", type=float, default=10, help="time range to draw (default 10)")
    parser.add_argument("--end", type=float, help="end of the range, Unix seconds (default now)")
    parser.add_argument("--dashboard", default=str(check.DASHBOARD), help="the dashboard JSON")
    parser.add_argument("--width", type=int, default=1600, help="PNG width in px (default 1600)")
    parser.add_argument("--dpi", type=int, default=100)
    parser.add_argument("--points", type=int, default=400,
                        help="data points per panel, as Grafana's max data points (default 400)")
    parser.add_argument("--scrape-interval", type=duration_seconds, default=15.0,
                        help="used when Prometheus's config cannot be read (default 15s)")
    args = parser.parse_args()
    if args.minutes <= 0:
        parser.error("--minutes must be more than 0")
    try:
        render(args)
    except RuntimeError as e:
        sys.exit(f"render.py: {e}")


if __name__ == "__main__":
    main()
