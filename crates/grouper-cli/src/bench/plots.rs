//! SVG plots of sweep results (plotters): runtime per strategy over the group count, the
//! performance regions of Karnagel's Fig. 5, with `auto`'s choice marked on them; and the
//! runtime over the launch-shape space of one point, Rosenfeld's Fig. 2.
// Plotting harness: it indexes the palette modulo its length.
#![allow(clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plot: {e}")
}

/// Runtime (ms, log scale) over log2 groups: one line per series name in `series`
/// (`(log2 groups, ms)` each), and `auto`'s times as large black dots.
pub fn regions(
    path: &Path,
    title: &str,
    series: &BTreeMap<String, Vec<(u32, f64)>>,
    auto: &[(u32, f64)],
) -> Result<()> {
    lines(path, title, "log2 groups", series, Some(auto))
}

/// Runtime (ms, log scale) over an integer x (`x_desc`): one line per series, and with
/// `marked` those points as large black dots labelled `auto`.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    series: &BTreeMap<String, Vec<(u32, f64)>>,
    marked: Option<&[(u32, f64)]>,
) -> Result<()> {
    let auto = marked.unwrap_or_default();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let all = series.values().flatten().chain(auto.iter());
    let (mut lo, mut hi, mut xmax) = (f64::MAX, f64::MIN, 0u32);
    for &(x, y) in all {
        if y.is_finite() && y > 0.0 {
            lo = lo.min(y);
            hi = hi.max(y);
        }
        xmax = xmax.max(x);
    }
    if lo > hi {
        return Err(anyhow!("plot {title}: no finite times"));
    }
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0u32..xmax + 1, (lo * 0.8..hi * 1.25).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("ms (log scale)")
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(u32, f64)> = pts.iter().copied().filter(|p| p.1.is_finite()).collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    if marked.is_some() {
        chart
            .draw_series(
                auto.iter()
                    .map(|&p| Circle::new(p, 6, BLACK.stroke_width(2))),
            )
            .map_err(err)?
            .label("auto")
            .legend(|(x, y)| Circle::new((x + 9, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Runtime relative to the best over blocks per SM (x) × threads per block (y), one cell per
/// shape, darker is faster (Rosenfeld's Fig. 2): `cells` are `(blocks/SM, threads, ms)`.
pub fn shape_space(path: &Path, title: &str, cells: &[(u32, u32, f64)]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let best = cells
        .iter()
        .map(|c| c.2)
        .filter(|t| t.is_finite())
        .fold(f64::MAX, f64::min);
    if best == f64::MAX {
        return Err(anyhow!("plot {title}: no finite times"));
    }
    let log = |v: u32| v.max(1).trailing_zeros();
    let xs: Vec<u32> = cells.iter().map(|c| log(c.0)).collect();
    let ys: Vec<u32> = cells.iter().map(|c| log(c.1)).collect();
    let (x0, x1) = (
        *xs.iter().min().unwrap_or(&0),
        *xs.iter().max().unwrap_or(&0),
    );
    let (y0, y1) = (
        *ys.iter().min().unwrap_or(&0),
        *ys.iter().max().unwrap_or(&0),
    );
    let root = SVGBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1 + 1, y0..y1 + 1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("log2 blocks per SM")
        .y_desc("log2 threads per block")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(cells.iter().map(|&(b, t, ms)| {
            // 1.0 (the best) is black, 2x and slower is white.
            let rel = if ms.is_finite() {
                (ms / best - 1.0).clamp(0.0, 1.0)
            } else {
                1.0
            };
            let g = (255.0 * rel) as u8;
            Rectangle::new(
                [(log(b), log(t)), (log(b) + 1, log(t) + 1)],
                RGBColor(g, g, g).filled(),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Grouped bars, log scale: for each label (a query), one bar per series (an engine) of its
/// time in ms; a missing (NaN) time leaves a gap.
pub fn bars(
    path: &Path,
    title: &str,
    labels: &[String],
    series: &BTreeMap<String, Vec<f64>>,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let finite = series
        .values()
        .flatten()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = finite.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    if lo > hi {
        return Err(anyhow!("plot {title}: no finite times"));
    }
    let n = labels.len().max(1);
    let root = SVGBackend::new(path, ((60 * n as u32).max(480) + 120, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, (lo * 0.5..hi * 2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            let centre = (x - x.floor() - 0.5).abs() < 1e-6;
            match labels.get(i) {
                Some(l) if centre => l.clone(),
                _ => String::new(),
            }
        })
        .y_desc("ms (log scale)")
        .draw()
        .map_err(err)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, (name, values)) in series.iter().enumerate() {
        let color = PALETTE[j % PALETTE.len()];
        let x0 = 0.1 + j as f64 * width;
        chart
            .draw_series(
                values
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(|(i, &v)| {
                        let left = i as f64 + x0;
                        Rectangle::new([(left, lo * 0.5), (left + width, v)], color.filled())
                    }),
            )
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_both_kinds() {
        let dir = std::env::temp_dir().join(format!("grouper-plots-{}", std::process::id()));
        let mut series = BTreeMap::new();
        series.insert(
            "perfect".to_string(),
            vec![(0, 1.0), (2, 2.0), (4, f64::NAN)],
        );
        series.insert("sort".to_string(), vec![(0, 5.0), (2, 4.0), (4, 3.0)]);
        let p = dir.join("regions.svg");
        regions(&p, "test", &series, &[(0, 1.1), (2, 2.0), (4, 3.0)]).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.contains("<svg") && svg.contains("perfect") && svg.contains("auto"));
        let q = dir.join("space.svg");
        shape_space(
            &q,
            "space",
            &[(1, 64, 2.0), (2, 128, 1.0), (4, 256, f64::INFINITY)],
        )
        .unwrap();
        assert!(std::fs::read_to_string(&q).unwrap().contains("<rect"));
        assert!(regions(&p, "empty", &BTreeMap::new(), &[]).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
