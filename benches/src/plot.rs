//! SVG charts of benchmark results (`--plot DIR`), drawn with `plotters`.
//!
//! Only the SVG backend is built, without `plotters`' `ttf` feature: text is written as SVG
//! `<text>` for the viewer to render, and its size is estimated from the character count, so no
//! font files, fontconfig or FreeType are needed on the machine. Two kinds of chart: grouped bars
//! (one group per case, a bar for Gossamer and one per peer: [`cases`], which every subcommand's
//! `--plot` uses) and lines (one per system, for latency against throughput: [`lines`]). This
//! module draws what it is given; it measures nothing.

use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

use crate::case::Case;

const SIZE: (u32, u32) = (960, 540);

/// The colours of the series, Gossamer's first.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A file name made of `text`: letters and digits kept, runs of anything else one `-`.
pub fn slug(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if c == 'µ' {
            s.push('u');
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

/// A line chart of `series` (each drawn in the order of its points), both axes logarithmic when
/// `log` (for curves over decades of load and latency).
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    log: bool,
) -> anyhow::Result<()> {
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let x_max = pts().map(|p| p.0).fold(0.0, f64::max).max(1e-9) * 1.05;
    let x_min = pts()
        .map(|p| p.0)
        .filter(|x| *x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let x_min = if x_min.is_finite() {
        x_min / 1.05
    } else {
        1e-3
    };
    let y_max = pts().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.3;
    let y_min = pts()
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_min = if y_min.is_finite() { y_min / 1.3 } else { 1e-3 };
    // A logarithmic axis is labelled at powers of ten: span whole decades so that it has some.
    let decades = |lo: f64, hi: f64| {
        let (lo, hi) = (
            10f64.powf(lo.log10().floor()),
            10f64.powf(hi.log10().ceil()),
        );
        (lo, if hi > lo { hi } else { lo * 10.0 })
    };
    let (y_lo, y_hi) = decades(y_min, y_max);
    let (x_lo, x_hi) = decades(x_min, x_max);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70);
    let style = |i: usize| ShapeStyle::from(colour(i)).stroke_width(2);
    macro_rules! draw_lines {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .draw()
                .map_err(draw)?;
            for (i, s) in series.iter().enumerate() {
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), style(i)))
                    .map_err(draw)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style(i)));
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|&p| Circle::new(p, 3, style(i).filled())),
                    )
                    .map_err(draw)?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(draw)?;
        }};
    }
    if log {
        draw_lines!(
            b.build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
                .map_err(draw)?
        );
    } else {
        draw_lines!(b.build_cartesian_2d(0.0..x_max, 0.0..y_max).map_err(draw)?);
    }
    root.present().map_err(draw)?;
    Ok(())
}

/// A grouped bar chart: one group per category, one bar per series (`values[series][category]`,
/// `None` for a figure not measured).
pub fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> anyhow::Result<()> {
    let k = series.len().max(1) as i32;
    let slot = k + 1;
    let n = categories.len() as i32;
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().flatten().copied())
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.35; // room for the legend above the tallest bar
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0..n * slot, 0.0..y_max)
        .map_err(draw)?;
    // About 6 px per character of the estimated font; longer names are cut with an ellipsis.
    let room = ((SIZE.0 as usize - 100) / categories.len().max(1) / 6).max(4);
    let label = |x: &i32| {
        // The category's name under the middle of its bars.
        if x % slot != k / 2 {
            return String::new();
        }
        let name = categories
            .get((x / slot) as usize)
            .cloned()
            .unwrap_or_default();
        if name.chars().count() <= room {
            name
        } else {
            name.chars().take(room - 1).chain(['…']).collect()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels((n * slot) as usize + 1)
        .x_label_formatter(&label)
        .y_desc(y_desc)
        .draw()
        .map_err(draw)?;
    for (i, (name, values)) in series.iter().enumerate() {
        let c = colour(i);
        let bars = values.iter().enumerate().filter_map(|(cat, v)| {
            let x = cat as i32 * slot + i as i32;
            v.map(|v| Rectangle::new([(x, 0.0), (x + 1, v)], c.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(draw)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

fn draw<E: std::error::Error + Send + Sync + 'static>(e: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

/// One bar chart per group of cases (the part of a case's name before `": "`) and unit, Gossamer
/// beside each peer, written to `dir` as `<command>-<group>-<unit>.svg`. Returns the files.
pub fn cases(dir: &Path, command: &str, cases: &[Case]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut groups: Vec<(String, String, Vec<&Case>)> = Vec::new();
    for c in cases {
        let group = c.case.split(": ").next().unwrap_or(&c.case).to_string();
        match groups.iter_mut().find(|g| g.0 == group && g.1 == c.unit) {
            Some(g) => g.2.push(c),
            None => groups.push((group, c.unit.clone(), vec![c])),
        }
    }
    let mut written = Vec::new();
    for (group, unit, members) in groups {
        let categories: Vec<String> = members
            .iter()
            .map(|c| {
                c.case
                    .strip_prefix(&format!("{group}: "))
                    .unwrap_or(&c.case)
                    .to_string()
            })
            .collect();
        let mut names = vec!["gsm".to_string()];
        for c in &members {
            for p in &c.peers {
                if !names.contains(&p.name) {
                    names.push(p.name.clone());
                }
            }
        }
        let series: Vec<(String, Vec<Option<f64>>)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let values = members
                    .iter()
                    .map(|c| {
                        if i == 0 {
                            c.gsm.map(|s| s.median)
                        } else {
                            c.peers
                                .iter()
                                .find(|p| &p.name == name)
                                .and_then(|p| p.summary)
                                .map(|s| s.median)
                        }
                    })
                    .collect();
                (name.clone(), values)
            })
            .collect();
        let arrow = if members[0].higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        let path = dir.join(format!(
            "{}-{}-{}.svg",
            slug(command),
            slug(&group),
            slug(&unit)
        ));
        bars(
            &path,
            &format!("{command}: {group} (medians)"),
            &format!("{unit} ({arrow})"),
            &categories,
            &series,
        )?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Figure;
    use crate::stats::summarize;

    #[test]
    fn cases_become_one_chart_per_group_and_unit_with_text() {
        let dir = std::env::temp_dir().join(format!("gsm-plot-test-{}", std::process::id()));
        let case = |name: &str, unit: &str, g: f64, p: f64| Case {
            case: name.into(),
            unit: unit.into(),
            higher_is_better: unit != "ms",
            gsm: summarize(&[g]),
            peers: vec![Figure {
                name: "redis-server".into(),
                summary: summarize(&[p]),
            }],
        };
        let cs = [
            case("kv a: SET P1", "kreq/s", 30.0, 32.0),
            case("kv a: GET P1", "kreq/s", 31.0, 29.0),
            case("kv a: SET P1 p99", "ms", 1.5, 1.2),
        ];
        let files = cases(&dir, "kv", &cs).unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<text") && svg.contains("redis-server"));
        assert!(svg.contains("SET P1") && svg.contains("<rect"));
        let curve = dir.join("line.svg");
        let s = Series {
            name: "gsm".into(),
            points: vec![(1.0, 0.1), (2.0, 0.5), (3.0, 4.0)],
        };
        lines(&curve, "t", "x", "y", &[s], true).unwrap();
        assert!(
            std::fs::read_to_string(&curve)
                .unwrap()
                .contains("<polyline")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
