//! SVG plots of a suite run, written by hand: a line chart with linear,
//! logarithmic or "nines" (percentile) axes, and a bar chart with
//! whiskers for the spread over repetitions.

use std::fmt::Write as _;

use super::plan::CONDITIONS;
use super::{Experiment, Measurement, Results};

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 240.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    Log10,
    Log2,
    /// Quantiles as nines: 0.9 -> 1, 0.99 -> 2, ...
    Nines,
}

impl Scale {
    fn map(self, v: f64) -> f64 {
        match self {
            Scale::Linear => v,
            Scale::Log10 => v.max(1e-12).log10(),
            Scale::Log2 => v.max(1e-12).log2(),
            Scale::Nines => -(1.0 - v.min(0.999_999)).log10(),
        }
    }

    /// Tick values between `lo` and `hi` (data units).
    fn ticks(self, lo: f64, hi: f64) -> Vec<f64> {
        match self {
            Scale::Linear => {
                let span = (hi - lo).max(1e-12);
                let raw = span / 5.0;
                let mag = 10f64.powf(raw.log10().floor());
                let step = [1.0, 2.0, 5.0, 10.0]
                    .iter()
                    .map(|m| m * mag)
                    .find(|s| span / s <= 6.0)
                    .unwrap_or(10.0 * mag);
                let mut t = (lo / step).ceil() * step;
                let mut out = Vec::new();
                while t <= hi + step * 1e-9 && out.len() < 12 {
                    out.push(t);
                    t += step;
                }
                out
            }
            Scale::Log10 => (lo.max(1e-12).log10().floor() as i32
                ..=hi.max(1e-12).log10().ceil() as i32)
                .map(|e| 10f64.powi(e))
                .filter(|t| *t >= lo * 0.999 && *t <= hi * 1.001)
                .collect(),
            Scale::Log2 => (lo.max(1e-12).log2().floor() as i32
                ..=hi.max(1e-12).log2().ceil() as i32)
                .map(|e| 2f64.powi(e))
                .filter(|t| *t >= lo * 0.999 && *t <= hi * 1.001)
                .collect(),
            Scale::Nines => [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999]
                .into_iter()
                .filter(|t| *t >= lo - 1e-12 && *t <= hi + 1e-12)
                .collect(),
        }
    }

    /// Widens `[lo, hi]` to whole decades where that reads better.
    fn range(self, lo: f64, hi: f64) -> (f64, f64) {
        match self {
            Scale::Log10 => (
                10f64.powf(lo.max(1e-12).log10().floor()),
                10f64.powf(hi.max(1e-12).log10().ceil()),
            ),
            Scale::Linear if lo >= 0.0 => (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 }),
            Scale::Nines => (0.0, hi.max(0.999)),
            _ => (lo, hi),
        }
    }
}

fn label(v: f64, scale: Scale) -> String {
    match scale {
        Scale::Nines => {
            let s = format!("{:.4}", v * 100.0);
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        _ if v >= 1e6 => format!("{}M", trim(v / 1e6)),
        _ if v >= 1e3 => format!("{}k", trim(v / 1e3)),
        _ => trim(v),
    }
}

/// Three significant digits, for labels on bars.
fn short(v: f64) -> String {
    let (v, unit) = match v {
        v if v >= 1e6 => (v / 1e6, "M"),
        v if v >= 1e3 => (v / 1e3, "k"),
        v => (v, ""),
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A named series of points, with optional (low, high) spread per point.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub spread: Vec<(f64, f64)>,
    pub dashed: bool,
}

pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub series: Vec<Series>,
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        escape(title)
    );
}

impl LineChart {
    /// The chart; `None` if no series has a point to draw.
    pub fn render(&self) -> Option<String> {
        let all: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied().chain(s.spread.iter().copied()))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        if all.is_empty() {
            return None;
        }
        let (xs, ys): (Vec<f64>, Vec<f64>) = self
            .series
            .iter()
            .flat_map(|s| {
                s.points.iter().copied().chain(
                    s.points
                        .iter()
                        .zip(&s.spread)
                        .flat_map(|(p, sp)| [(p.0, sp.0), (p.0, sp.1)]),
                )
            })
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .unzip();
        let fold = |v: &[f64]| {
            v.iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    (lo.min(x), hi.max(x))
                })
        };
        let (x_lo, x_hi) = fold(&xs);
        let (y_lo, y_hi) = fold(&ys);
        let (x_lo, x_hi) = self.x_scale.range(x_lo, x_hi.max(x_lo * 1.0001 + 1e-9));
        let (y_lo, y_hi) = self.y_scale.range(y_lo, y_hi.max(y_lo * 1.0001 + 1e-9));
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let (mx_lo, mx_hi) = (self.x_scale.map(x_lo), self.x_scale.map(x_hi));
        let (my_lo, my_hi) = (self.y_scale.map(y_lo), self.y_scale.map(y_hi));
        let px =
            |x: f64| LEFT + (self.x_scale.map(x) - mx_lo) / (mx_hi - mx_lo).max(1e-12) * plot_w;
        let py = |y: f64| {
            TOP + plot_h - (self.y_scale.map(y) - my_lo) / (my_hi - my_lo).max(1e-12) * plot_h
        };

        let mut out = String::new();
        header(&mut out, &self.title);
        axes(&mut out, &self.x_label, &self.y_label);
        for t in self.x_scale.ticks(x_lo, x_hi) {
            let x = px(t);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 16.0,
                label(t, self.x_scale)
            );
        }
        for t in self.y_scale.ticks(y_lo, y_hi) {
            y_gridline(&mut out, py(t), &label(t, self.y_scale));
        }
        for (i, s) in self.series.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let points: Vec<String> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let dash = if s.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>"#,
                points.join(" ")
            );
            for (&(x, _), &(lo, hi)) in s.points.iter().zip(&s.spread) {
                let _ = writeln!(
                    out,
                    r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{colour}"/>"#,
                    px(x),
                    py(lo),
                    py(hi)
                );
            }
            legend(&mut out, i, &s.name, colour, s.dashed);
        }
        out.push_str("</svg>\n");
        Some(out)
    }
}

/// A horizontal grid line at height `y`, labelled on the left.
fn y_gridline(out: &mut String, y: f64, text: &str) {
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{text}</text>"##,
        WIDTH - RIGHT,
        LEFT - 6.0,
        y + 4.0,
    );
}

fn axes(out: &mut String, x_label: &str, y_label: &str) {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let _ = writeln!(
        out,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>
<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>
<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 16.0,
        escape(x_label),
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_label)
    );
}

fn legend(out: &mut String, i: usize, name: &str, colour: &str, dashed: bool) {
    let x = WIDTH - RIGHT + 14.0;
    let y = TOP + 10.0 + i as f64 * 20.0;
    let dash = if dashed {
        r#" stroke-dasharray="6,4""#
    } else {
        ""
    };
    let _ = writeln!(
        out,
        r#"<line x1="{x}" y1="{y}" x2="{:.1}" y2="{y}" stroke="{colour}" stroke-width="3"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
        x + 22.0,
        x + 28.0,
        y + 4.0,
        escape(name)
    );
}

/// One bar: label, median, and the spread (min, max) over repetitions.
pub struct Bar {
    pub label: String,
    pub median: f64,
    pub spread: (f64, f64),
}

pub fn bar_chart(title: &str, y_label: &str, y_scale: Scale, bars: &[Bar]) -> Option<String> {
    let bars: Vec<&Bar> = bars
        .iter()
        .filter(|b| b.median.is_finite() && b.median > 0.0)
        .collect();
    if bars.is_empty() {
        return None;
    }
    let hi = bars
        .iter()
        .map(|b| b.spread.1.max(b.median))
        .fold(0.0, f64::max);
    let lo = bars
        .iter()
        .map(|b| b.spread.0.min(b.median))
        .fold(f64::INFINITY, f64::min);
    let (y_lo, y_hi) = match y_scale {
        Scale::Log10 => y_scale.range(lo, hi),
        _ => (0.0, hi * 1.1),
    };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let (m_lo, m_hi) = (y_scale.map(y_lo), y_scale.map(y_hi));
    let py = |y: f64| TOP + plot_h - (y_scale.map(y) - m_lo) / (m_hi - m_lo).max(1e-12) * plot_h;
    let mut out = String::new();
    header(&mut out, title);
    axes(&mut out, "", y_label);
    for t in y_scale.ticks(y_lo, y_hi) {
        y_gridline(&mut out, py(t), &label(t, y_scale));
    }
    let slot = plot_w / bars.len() as f64;
    for (i, b) in bars.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let x = LEFT + slot * i as f64 + slot * 0.2;
        let w = slot * 0.6;
        let top = py(b.median);
        let _ = writeln!(
            out,
            r#"<rect x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{:.1}" fill="{colour}"/>
<line x1="{1:.1}" y1="{2:.1}" x2="{1:.1}" y2="{3:.1}" stroke="black"/>
<text x="{1:.1}" y="{4:.1}" text-anchor="middle" font-size="11">{5}</text>"#,
            (TOP + plot_h - top).max(0.0),
            x + w / 2.0,
            py(b.spread.0.max(y_lo)),
            py(b.spread.1),
            top.min(py(b.spread.1)) - 6.0,
            short(b.median)
        );
        legend(&mut out, i, &b.label, colour, false);
    }
    out.push_str("</svg>\n");
    Some(out)
}

fn bar(label: String, m: Option<&Measurement>, metric: &str) -> Option<Bar> {
    let f = m?.metrics.get(metric)?;
    Some(Bar {
        label,
        median: f.median?,
        spread: (f.min?, f.max?),
    })
}

/// Every plot the results support, as `(file name, SVG)`.
pub fn plots(r: &Results) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let find = |e: Experiment, subject: &str, params: &[(&str, &str)]| {
        r.measurements.iter().find(|m| {
            m.experiment == e
                && m.subject == subject
                && params.iter().all(|(k, v)| m.param(k) == Some(*v))
        })
    };
    if r.experiments.contains(&Experiment::LineRate) {
        let mut series = Vec::new();
        for verb in ["write", "cas"] {
            let mut s = Series {
                name: format!("OAE {}", verb.to_uppercase()),
                ..Series::default()
            };
            for &slots in &r.options.slots {
                let slots_s = slots.to_string();
                let fig = find(
                    Experiment::LineRate,
                    "oae",
                    &[("verb", verb), ("slots", &slots_s), ("driver", "af-xdp")],
                )
                .and_then(|m| m.metrics.get("verbs_per_s"));
                if let Some(f) = fig
                    && let (Some(med), Some(lo), Some(hi)) = (f.median, f.min, f.max)
                {
                    s.points.push((f64::from(slots), med));
                    s.spread.push((lo, hi));
                }
            }
            series.push(s);
        }
        let (x_lo, x_hi) = (
            f64::from(r.options.slots.iter().copied().min().unwrap_or(1)),
            f64::from(r.options.slots.iter().copied().max().unwrap_or(1)),
        );
        for (subject, name) in [
            ("raw-af-xdp", "raw AF_XDP reflector"),
            ("testpmd", "testpmd macswap"),
        ] {
            if let Some(v) =
                find(Experiment::LineRate, subject, &[]).and_then(|m| m.median("frames_per_s"))
            {
                series.push(Series {
                    name: name.into(),
                    points: vec![(x_lo, v), (x_hi, v)],
                    spread: Vec::new(),
                    dashed: true,
                });
            }
        }
        let chart = LineChart {
            title: "Throughput vs slots per link (AF_XDP, 64 B verbs)".into(),
            x_label: "slots per link (one verb lane per slot)".into(),
            y_label: "verbs/s (references: frames/s)".into(),
            x_scale: Scale::Log2,
            y_scale: Scale::Linear,
            series,
        };
        if let Some(svg) = chart.render() {
            out.push(("throughput-vs-slots.svg".into(), svg));
        }
        let slots = super::plan::driver_slots(&r.options).to_string();
        let mut bars: Vec<Bar> = ["af-xdp", "dpdk net_af_xdp", "dpdk net_memif"]
            .into_iter()
            .filter_map(|d| {
                bar(
                    format!("OAE CAS, {d}"),
                    find(
                        Experiment::LineRate,
                        "oae",
                        &[("verb", "cas"), ("slots", &slots), ("driver", d)],
                    ),
                    "verbs_per_s",
                )
            })
            .collect();
        bars.extend(bar(
            "raw AF_XDP reflector".into(),
            find(Experiment::LineRate, "raw-af-xdp", &[]),
            "frames_per_s",
        ));
        bars.extend(bar(
            "testpmd macswap".into(),
            find(Experiment::LineRate, "testpmd", &[]),
            "frames_per_s",
        ));
        if let Some(svg) = bar_chart(
            &format!("Throughput per driver ({slots} slots)"),
            "verbs/s (references: frames/s)",
            Scale::Linear,
            &bars,
        ) {
            out.push(("throughput-per-driver.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Latency) {
        let mut bars = Vec::new();
        for placement in ["cross-core", "same-core"] {
            for (subject, params, name) in [
                ("oae", Some(("verb", "cas")), "OAE CAS"),
                ("oae", Some(("verb", "read")), "OAE READ"),
                ("raw-af-xdp", None, "raw ping-pong"),
                ("sockperf", None, "sockperf UDP"),
            ] {
                let mut p = vec![("placement", placement)];
                p.extend(params);
                bars.extend(bar(
                    format!("{name}, {placement}"),
                    find(Experiment::Latency, subject, &p),
                    "p50_us",
                ));
            }
        }
        if let Some(svg) = bar_chart(
            "Round trip p50 (bars) and spread over repetitions",
            "microseconds (log)",
            Scale::Log10,
            &bars,
        ) {
            out.push(("latency-p50.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Failure) {
        for (transport, title) in [
            ("oae", "OAE"),
            ("rc-model", "RoCE RC model"),
            ("redis", "Redis INCR over kernel TCP"),
        ] {
            let series: Vec<Series> = CONDITIONS
                .iter()
                .filter_map(|(cond, ..)| {
                    let m = find(Experiment::Failure, transport, &[("condition", cond)])?;
                    (!m.cdf.is_empty()).then(|| Series {
                        name: (*cond).to_string(),
                        points: m.cdf.iter().map(|&(q, us)| (us.max(0.1), q)).collect(),
                        spread: Vec::new(),
                        dashed: false,
                    })
                })
                .collect();
            let chart = LineChart {
                title: format!("{title}: latency while faults are on"),
                x_label: "latency, microseconds (log)".into(),
                y_label: "percentile".into(),
                x_scale: Scale::Log10,
                y_scale: Scale::Nines,
                series,
            };
            if let Some(svg) = chart.render() {
                out.push((format!("latency-cdf-{transport}.svg"), svg));
            }
        }
        // OAE's tail while the faults are on against the TCP baseline's
        // (whose whole run is under them).
        let mut bars = Vec::new();
        for (cond, short_name) in [
            ("loss 1%", "1 %"),
            ("loss 5%", "5 %"),
            ("loss 1%, 1 lane", "1 %, 1 lane"),
        ] {
            bars.extend(bar(
                format!("OAE, {short_name}"),
                find(Experiment::Failure, "oae", &[("condition", cond)]),
                "during_p999_us",
            ));
            bars.extend(bar(
                format!("Redis TCP, {short_name}"),
                find(Experiment::Failure, "redis", &[("condition", cond)]),
                "p999_us",
            ));
        }
        if let Some(svg) = bar_chart(
            "p99.9 under loss: OAE vs Redis INCR over kernel TCP",
            "microseconds (log)",
            Scale::Log10,
            &bars,
        ) {
            out.push(("failure-p999-oae-vs-tcp.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Sizes) {
        let bars: Vec<Bar> = r
            .measurements
            .iter()
            .filter(|m| m.experiment == Experiment::Sizes)
            .filter_map(|m| {
                let label = format!(
                    "{} {} B",
                    m.param("verb").unwrap_or("?").to_uppercase(),
                    m.param("bytes").unwrap_or("?")
                );
                bar(label, Some(m), "payload_gbps")
            })
            .collect();
        if let Some(svg) = bar_chart(
            "Payload moved by WRITE and READ, by message size",
            "Gb/s",
            Scale::Linear,
            &bars,
        ) {
            out.push(("sizes-gbps.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Scale) {
        let bars: Vec<Bar> = r
            .measurements
            .iter()
            .filter(|m| m.experiment == Experiment::Scale)
            .filter_map(|m| {
                let label = format!(
                    "{}, {} queue(s)",
                    m.param("driver").unwrap_or("?"),
                    m.param("queues").unwrap_or("?")
                );
                bar(label, Some(m), "verbs_per_s")
            })
            .collect();
        if let Some(svg) = bar_chart(
            "OAE CAS verbs/s with one and two queues per dataplane",
            "verbs/s",
            Scale::Linear,
            &bars,
        ) {
            out.push(("scale-verbs.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Fabric) {
        let bars: Vec<Bar> = r
            .measurements
            .iter()
            .filter(|m| m.experiment == Experiment::Fabric)
            .filter_map(|m| match m.param("topology") {
                Some("pair") => bar(
                    format!("{} pair, link down", m.subject),
                    Some(m),
                    "during_verbs_per_s",
                ),
                _ => bar(
                    "OAE fabric ring:4, link cut".into(),
                    Some(m),
                    "cut_pair_after_verbs_per_s",
                ),
            })
            .collect();
        if let Some(svg) = bar_chart(
            "Verbs/s between a link's ends while it is down",
            "verbs/s",
            Scale::Linear,
            &bars,
        ) {
            out.push(("fabric-cut-verbs.svg".into(), svg));
        }
    }
    if r.experiments.contains(&Experiment::Ipu) {
        for read in ["0", "750"] {
            let bars: Vec<Bar> = r
                .measurements
                .iter()
                .filter(|m| {
                    m.experiment == Experiment::Ipu
                        && m.param("workload") == Some("sched")
                        && m.param("read_ns") == Some(read)
                })
                .filter_map(|m| bar(m.subject.clone(), Some(m), "per_s"))
                .collect();
            if let Some(svg) = bar_chart(
                &format!("Scheduling offload: committed decisions/s, {read} ns reads"),
                "decisions/s",
                Scale::Linear,
                &bars,
            ) {
                out.push((format!("ipu-decisions-read{read}.svg"), svg));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_draws_every_series_and_its_legend() {
        let chart = LineChart {
            title: "t <1>".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_scale: Scale::Log2,
            y_scale: Scale::Linear,
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(1.0, 10.0), (64.0, 100.0)],
                    spread: vec![(9.0, 11.0), (90.0, 120.0)],
                    dashed: false,
                },
                Series {
                    name: "b".into(),
                    points: vec![(1.0, 50.0), (64.0, 50.0)],
                    spread: vec![],
                    dashed: true,
                },
            ],
        };
        let svg = chart.render().unwrap();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains(">64<"), "log2 ticks: {svg}");
        assert!(!svg.contains("NaN"));
        let empty = LineChart {
            series: vec![],
            ..chart
        };
        assert!(empty.render().is_none());
    }

    #[test]
    fn bar_labels_keep_three_digits() {
        assert_eq!(short(293_350.0), "293k");
        assert_eq!(short(8.4), "8.40");
        assert_eq!(short(12_394.5), "12.4k");
        assert_eq!(short(1_225_000.0), "1.23M");
    }

    #[test]
    fn nines_put_the_tail_in_view() {
        assert!((Scale::Nines.map(0.99) - 2.0).abs() < 1e-9);
        assert!((Scale::Nines.map(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(label(0.999, Scale::Nines), "99.9");
        assert_eq!(label(0.99999, Scale::Nines), "99.999");
        assert_eq!(label(0.5, Scale::Nines), "50");
    }

    #[test]
    fn bars_skip_what_was_not_measured() {
        let bars = [
            Bar {
                label: "x".into(),
                median: 5.0,
                spread: (4.0, 6.0),
            },
            Bar {
                label: "y".into(),
                median: f64::NAN,
                spread: (0.0, 0.0),
            },
        ];
        let svg = bar_chart("t", "us", Scale::Log10, &bars).unwrap();
        assert_eq!(svg.matches("<rect x=").count(), 2, "frame and one bar");
        assert!(bar_chart("t", "us", Scale::Linear, &bars[1..]).is_none());
    }
}
