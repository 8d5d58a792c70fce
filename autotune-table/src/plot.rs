//! One SVG per kernel and table: every valid variant's time relative to the
//! incumbent (the default, or the fallback) against the key, both on log scales,
//! with the dispatch ranges shaded and labelled with their pick. `cargo autotune
//! plot` writes them; a tuning build writes them beside the table it rewrote.

use std::fmt::Write as _;

use crate::table::{FALLBACK, KernelTable, TuningTable};

const WIDTH: f64 = 1200.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 440.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

pub fn render(name: &str, kernel: &KernelTable, table: &TuningTable) -> String {
    let keys: Vec<u64> = kernel.sizes.iter().map(|s| s.key).collect();
    let (Some(&kmin), Some(&kmax)) = (keys.iter().min(), keys.iter().max()) else {
        return String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n");
    };
    let series = series(kernel);
    let ratios = series.iter().flat_map(|(_, p)| p.iter().map(|(_, r)| *r));
    let (lo, hi) = ratios.fold((1.0f64, 1.0f64), |(a, b), r| (a.min(r), b.max(r)));
    let (x0, x1) = (
        (kmin.max(1) as f64).log2(),
        (kmax.max(2) as f64)
            .log2()
            .max((kmin.max(1) as f64).log2() + 1.0),
    );
    let canvas = Canvas {
        x0,
        x1,
        ylo: lo.max(0.25) * 0.95,
        yhi: hi.min(4.0) * 1.05,
        plot_w: WIDTH - LEFT - RIGHT,
        plot_h: HEIGHT - TOP - BOTTOM,
        kmin,
        kmax,
        owners: owners(kernel),
    };
    let mut svg = String::new();
    canvas.title(&mut svg, name, kernel, table);
    canvas.ranges(&mut svg, kernel);
    canvas.axes(&mut svg, kernel, &keys);
    canvas.series(&mut svg, &series);
    canvas.legend(&mut svg);
    svg.push_str("</svg>\n");
    svg
}

/// Each valid variant's `(key, time / incumbent's time)` points.
fn series(kernel: &KernelTable) -> Vec<(&str, Vec<(u64, f64)>)> {
    let incumbent_at = |key: u64| {
        kernel
            .sizes
            .iter()
            .find(|s| s.key == key)
            .map(|s| s.incumbent_us)
    };
    kernel
        .variants
        .iter()
        .filter(|v| v.rejected.is_none())
        .map(|v| {
            let points = v
                .measurements
                .iter()
                .filter_map(|m| {
                    incumbent_at(m.key)
                        .filter(|i| *i > 0.0)
                        .map(|i| (m.key, m.median_us / i))
                })
                .collect();
            (v.name.as_str(), points)
        })
        .collect()
}

/// The variants that own a range, each once, in the order of the ranges.
fn owners(kernel: &KernelTable) -> Vec<&str> {
    let mut unique = Vec::new();
    for range in &kernel.ranges {
        if !unique.contains(&range.choice.as_str()) {
            unique.push(range.choice.as_str());
        }
    }
    unique
}

/// The plot's scales (log2 of the key across, log of the ratio up) and its owners'
/// colours.
struct Canvas<'a> {
    x0: f64,
    x1: f64,
    ylo: f64,
    yhi: f64,
    plot_w: f64,
    plot_h: f64,
    kmin: u64,
    kmax: u64,
    owners: Vec<&'a str>,
}

impl Canvas<'_> {
    fn x(&self, key: f64) -> f64 {
        LEFT + (key.max(1.0).log2() - self.x0) / (self.x1 - self.x0) * self.plot_w
    }

    fn y(&self, ratio: f64) -> f64 {
        let (ylo, yhi) = (self.ylo, self.yhi);
        TOP + (yhi.ln() - ratio.clamp(ylo, yhi).ln()) / (yhi.ln() - ylo.ln()) * self.plot_h
    }

    /// The colour of the owner `variant` (any fallback point counts as the fallback).
    fn color(&self, variant: &str) -> Option<&'static str> {
        let owner = if variant.starts_with(FALLBACK) {
            FALLBACK
        } else {
            variant
        };
        self.owners
            .iter()
            .position(|o| *o == owner)
            .map(|i| PALETTE[i % PALETTE.len()])
    }

    fn title(&self, svg: &mut String, name: &str, kernel: &KernelTable, table: &TuningTable) {
        let _ = writeln!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = writeln!(svg, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"24\" font-size=\"15\">{} on {} ({}), tuned {}: time / incumbent's time</text>",
            escape(name),
            escape(&table.gpu.name),
            table.gpu.arch(),
            escape(&kernel.tuned_on)
        );
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"40\" font-size=\"11\" fill=\"#555\">incumbent: {}; shaded: the range each pick owns</text>",
            escape(&match kernel.fallback.as_deref() {
                None => kernel.default.clone(),
                Some(crate::table::FALLBACK) => "the fallback, as its own plan runs it".into(),
                Some(name) => format!("{name}, as its own plan runs it"),
            })
        );
    }

    /// Each range shaded, with its pick.
    fn ranges(&self, svg: &mut String, kernel: &KernelTable) {
        let (kmin, kmax, plot_h) = (self.kmin, self.kmax, self.plot_h);
        for (i, range) in kernel.ranges.iter().enumerate() {
            let a = self.x((range.first.max(kmin)) as f64).max(LEFT);
            let b = if range.last == u64::MAX {
                WIDTH - RIGHT
            } else {
                self.x(range.last.min(kmax) as f64 + 1.0).min(WIDTH - RIGHT)
            };
            if b <= a {
                continue;
            }
            let fill = self.color(&range.choice).unwrap_or("#999999");
            let _ = writeln!(
                svg,
                "<rect x=\"{a:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{plot_h}\" fill=\"{fill}\" opacity=\"{}\"/>",
                b - a,
                if i % 2 == 0 { 0.10 } else { 0.16 }
            );
            let label = if range.last == u64::MAX {
                format!("{}..: {}", range.first, range.choice)
            } else {
                range.choice.clone()
            };
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"{fill}\" transform=\"rotate(-90 {:.1} {:.1})\">{}</text>",
                a + 12.0,
                TOP + plot_h - 6.0,
                a + 12.0,
                TOP + plot_h - 6.0,
                escape(&label)
            );
        }
    }

    /// The frame, the ratio grid and the key ticks.
    fn axes(&self, svg: &mut String, kernel: &KernelTable, keys: &[u64]) {
        let (plot_w, plot_h, ylo, yhi) = (self.plot_w, self.plot_h, self.ylo, self.yhi);
        let _ = writeln!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"black\"/>"
        );
        for ratio in [
            0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0,
        ] {
            if ratio < ylo || ratio > yhi {
                continue;
            }
            let yy = self.y(ratio);
            let dash = if ratio == 1.0 {
                ""
            } else {
                " stroke-dasharray=\"2,4\""
            };
            let _ = writeln!(
                svg,
                "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"#888\"{dash}/>",
                WIDTH - RIGHT
            );
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{ratio}</text>",
                LEFT - 6.0,
                yy + 4.0
            );
        }
        let mut last_label = f64::NEG_INFINITY;
        for &key in keys {
            let xx = self.x(key as f64);
            let refinement = kernel.sizes.iter().any(|s| s.key == key && s.refinement);
            let _ = writeln!(
                svg,
                "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
                TOP + plot_h,
                TOP + plot_h + (if refinement { 3.0 } else { 6.0 })
            );
            if !refinement && xx - last_label > 48.0 {
                last_label = xx;
                let _ = writeln!(
                    svg,
                    "<text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{key}</text>",
                    TOP + plot_h + 20.0
                );
            }
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} (log scale; short ticks: refinement points)</text>",
            LEFT + plot_w / 2.0,
            HEIGHT - 12.0,
            escape(&kernel.key)
        );
    }

    /// Each variant's line: coloured for self.owners, gray for the others.
    fn series(&self, svg: &mut String, series: &[(&str, Vec<(u64, f64)>)]) {
        for (variant, points) in series {
            if points.is_empty() {
                continue;
            }
            let (stroke, width) = match self.color(variant) {
                Some(c) if self.owners.contains(variant) || variant.starts_with(FALLBACK) => {
                    (c, 2.2)
                }
                _ => ("#c8c8c8", 1.0),
            };
            let path: Vec<String> = points
                .iter()
                .map(|(k, r)| format!("{:.1},{:.1}", self.x(*k as f64), self.y(*r)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>",
                path.join(" ")
            );
            for (k, r) in points {
                let _ = writeln!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{stroke}\"/>",
                    self.x(*k as f64),
                    self.y(*r)
                );
            }
        }
    }

    /// The picks, with their colours.
    fn legend(&self, svg: &mut String) {
        for (i, owner) in self.owners.iter().enumerate() {
            let yy = TOP + 14.0 + i as f64 * 18.0;
            let c = PALETTE[i % PALETTE.len()];
            let _ = writeln!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" stroke=\"{c}\" stroke-width=\"3\"/>",
                WIDTH - RIGHT + 12.0,
                WIDTH - RIGHT + 32.0
            );
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
                WIDTH - RIGHT + 36.0,
                yy + 4.0,
                escape(owner)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#999\">gray: other valid variants</text>",
            WIDTH - RIGHT + 12.0,
            TOP + 14.0 + self.owners.len() as f64 * 18.0
        );
    }
}

/// `text` as SVG text: markup escaped, control characters (which XML forbids) dropped.
fn escape(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_is_shaded_and_every_pick_in_the_legend() {
        let table = crate::testing::fixture_table();
        let kernel = &table.kernels["rms_norm"];
        let svg = render("rms_norm", kernel, &table);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // One band per range that starts inside the timed keys.
        let top = kernel.sizes.iter().map(|s| s.key).max().unwrap();
        let inside = kernel.ranges.iter().filter(|r| r.first <= top).count();
        let bands = svg.matches("opacity=").count();
        assert_eq!(bands, inside, "{svg}");
        for range in &kernel.ranges {
            assert!(svg.contains(&range.choice), "{} missing", range.choice);
        }
    }

    /// Table strings are data: markup in them stays text.
    #[test]
    fn hostile_strings_stay_text() {
        let mut table = crate::testing::fixture_table();
        table.gpu.name = "<script>alert(1)</script>".into();
        let mut kernel = table.kernels["rms_norm"].clone();
        kernel.key = "n\"><script>".into();
        kernel.tuned_on = "\u{1b}[2K&".into();
        let svg = render("a<b", &kernel, &table);
        assert!(!svg.contains("<script"), "{svg}");
        assert!(svg.contains("&lt;script&gt;") && svg.contains("a&lt;b"));
        assert!(!svg.contains('\u{1b}') && svg.contains("[2K&amp;"));
    }
}
