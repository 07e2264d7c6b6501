//! A quality-vs-latency scatter as a small standalone SVG (one labelled point per model pair). Written by hand:
//! it is a few dozen lines, and a plotting crate's SVG backend would need font files to measure its labels.

/// One point: a label, seconds per sample (x), quality 0..1 (y).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The pair's label.
    pub label: String,
    /// Median seconds per sample.
    pub seconds: f64,
    /// Quality in 0..=1.
    pub quality: f64,
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The SVG text of the scatter, titled `title`, with `quality_name` on the y axis.
pub fn scatter_svg(title: &str, quality_name: &str, points: &[Point]) -> String {
    let (width, height, left, right, top, bottom) = (720.0, 440.0, 70.0, 200.0, 40.0, 50.0);
    let max_seconds = points.iter().map(|p| p.seconds).fold(0.0_f64, f64::max).max(1e-9) * 1.1;
    let x = |s: f64| left + s / max_seconds * (width - left - right);
    let y = |q: f64| top + (1.0 - q.clamp(0.0, 1.0)) * (height - top - bottom);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"24\" font-size=\"15\">{}</text>\n",
        escape(title)
    );
    let (x0, x1, y0, y1) = (x(0.0), x(max_seconds), y(0.0), y(1.0));
    svg += &format!("<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/>\n");
    svg += &format!("<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"black\"/>\n");
    for tick in 0..=4 {
        let q = f64::from(tick) / 4.0;
        svg += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{q:.2}</text>\n", x0 - 6.0, y(q) + 4.0);
        let s = max_seconds * q;
        svg += &format!("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{s:.1}</text>\n", x(s), y0 + 18.0);
    }
    svg += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">median seconds per sample</text>\n",
        (x0 + x1) / 2.0,
        height - 8.0
    );
    svg += &format!(
        "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">{}</text>\n",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(quality_name)
    );
    for p in points {
        let (px, py) = (x(p.seconds), y(p.quality));
        svg += &format!("<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"5\" fill=\"#1f77b4\"/>\n");
        svg += &format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">{} ({:.2})</text>\n",
            px + 8.0,
            py + 4.0,
            escape(&p.label),
            p.quality
        );
    }
    svg + "</svg>\n"
}
