//! The picture beside the table: one small panel per figure, a bar per server (the median)
//! with a min..max whisker over the repetitions. SVG through `plotters` (SVG backend only, no
//! font libraries: text is left to the viewer).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::Row;

const JS: RGBColor = RGBColor(230, 120, 30);
const NATS: RGBColor = RGBColor(40, 110, 190);
const COLS: usize = 5;
const PANEL: (u32, u32) = (280, 190);
const HEADER: u32 = 60;

/// Writes `rows` as an SVG grid of bar charts to `path`.
pub fn write_svg(rows: &[Row], title: &str, path: &Path) -> Result<()> {
    let nrows = rows.len().div_ceil(COLS).max(1);
    let size = (PANEL.0 * COLS as u32, HEADER + PANEL.1 * nrows as u32);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (header, body) = root.split_vertically(HEADER);
    header
        .draw(&Text::new(
            title.to_owned(),
            (10, 8),
            ("sans-serif", 18).into_font(),
        ))
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (name, color)) in [("jsserver", JS), ("nats-server", NATS)]
        .into_iter()
        .enumerate()
    {
        let x = 10 + 150 * i as i32;
        header
            .draw(&Rectangle::new([(x, 36), (x + 14, 50)], color.filled()))
            .map_err(|e| anyhow!("{e}"))?;
        header
            .draw(&Text::new(
                name,
                (x + 20, 36),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(|e| anyhow!("{e}"))?;
    }
    header
        .draw(&Text::new(
            "bar: median, whisker: min..max over repetitions",
            (320, 36),
            ("sans-serif", 13).into_font().color(&BLACK.mix(0.6)),
        ))
        .map_err(|e| anyhow!("{e}"))?;

    let panels = body.split_evenly((nrows, COLS));
    for (row, panel) in rows.iter().zip(panels.iter()) {
        panel_chart(panel, row)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn panel_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    row: &Row,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let servers = [(&row.ours, JS), (&row.theirs, NATS)];
    let top = servers
        .iter()
        .filter_map(|(s, _)| s.as_ref().map(|s| s.max))
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.15;
    let ratio = row
        .ratio()
        .map(|r| format!(" · ratio {r:.2}"))
        .unwrap_or_default();
    let caption = format!("{}: {}", row.scenario, row.figure);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 12))
        .margin(6)
        .x_label_area_size(18)
        .y_label_area_size(46)
        .build_cartesian_2d(0.0..2.0_f64, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .x_labels(0)
        .y_labels(4)
        .y_label_formatter(&|v| short(*v))
        .y_label_style(("sans-serif", 10))
        .x_desc(format!("{}{ratio}", row.unit))
        .axis_desc_style(("sans-serif", 11))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (stats, color)) in servers.into_iter().enumerate() {
        let Some(s) = stats else { continue };
        let x0 = i as f64 + 0.2;
        let x1 = i as f64 + 0.8;
        let xm = i as f64 + 0.5;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (x1, s.median)],
                color.filled(),
            )))
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .draw_series([
                PathElement::new(vec![(xm, s.min), (xm, s.max)], BLACK.stroke_width(1)),
                PathElement::new(
                    vec![(xm - 0.1, s.min), (xm + 0.1, s.min)],
                    BLACK.stroke_width(1),
                ),
                PathElement::new(
                    vec![(xm - 0.1, s.max), (xm + 0.1, s.max)],
                    BLACK.stroke_width(1),
                ),
            ])
            .map_err(|e| anyhow!("{e}"))?;
        chart
            .draw_series(std::iter::once(Text::new(
                short(s.median),
                (x0, s.max + top * 0.09),
                ("sans-serif", 10).into_font(),
            )))
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// 1234567 → "1.23M", 12345 → "12.3k", 3.456 → "3.46".
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
