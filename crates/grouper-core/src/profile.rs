//! A device profile: which strategy `grouper calibrate` measured fastest on this machine, per
//! key kind, skew and group count (the crossover points), and the launch shape the tuner found.
//!
//! The papers' point (Rosenfeld §1: a configuration tuned for one GPU runs up to 21× slower on
//! another) is that rules written for one device misplace the crossovers on the next. The
//! planner consults a profile before its rules, where one was measured near the estimate;
//! without one, or away from its points, the rules decide. Storage (JSON in the user's cache
//! directory, keyed by device, driver and version) is the command-line tool's job.

use std::fmt;

/// Keys of a calibration point: dense keys fill a small domain (a direct-index table
/// applies); hashed keys are scattered over a wide one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// Keys `0..groups`.
    Dense,
    /// Keys scattered over the 64-bit range.
    Hashed,
}

impl KeyKind {
    /// Name in profiles and reports.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Dense => "dense",
            KeyKind::Hashed => "hashed",
        }
    }

    /// Parses [`KeyKind::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "dense" => Some(KeyKind::Dense),
            "hashed" => Some(KeyKind::Hashed),
            _ => None,
        }
    }
}

/// One measured point: every strategy's time at `2^groups_log2` groups of `kind` keys,
/// uniform or skewed.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Key kind.
    pub kind: KeyKind,
    /// Whether the keys were skewed (zipf): hot keys rank the strategies differently (one
    /// shared table serializes their updates; per-block tables absorb them).
    pub skewed: bool,
    /// log2 of the group count.
    pub groups_log2: u32,
    /// (strategy name, milliseconds) for each strategy that ran.
    pub ms: Vec<(String, f64)>,
    /// The tuner's best launch shape for the fastest strategy (blocks per SM, threads per
    /// block, items per thread), when calibration tuned it.
    pub shape: Option<(u32, u32, u32)>,
}

impl Point {
    /// The strategies measured here, with their times (a strategy that failed has none).
    fn measured(&self) -> impl Iterator<Item = (&str, f64)> {
        self.ms
            .iter()
            .filter(|(_, t)| t.is_finite() && *t > 0.0)
            .map(|(s, t)| (s.as_str(), *t))
    }

    /// The fastest strategy and its time.
    pub fn best(&self) -> Option<(&str, f64)> {
        self.measured().min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// A machine's profile: the device it was measured on and its points.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Device (GPU name and driver, or CPU model and threads) and grouper version.
    pub device: String,
    /// Measured points.
    pub points: Vec<Point>,
}

/// How far (in log2 groups) a point may be from an estimate and still decide for it.
pub const NEAR_LOG2: f64 = 1.5;

/// What a profile says for one estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice<'a> {
    /// The point it comes from (of two, the nearer).
    pub point: &'a Point,
    /// The other point, when the estimate lies between two that disagree.
    pub between: Option<&'a Point>,
    /// Strategies of the point, fastest first (between two points: their times interpolated).
    pub ranked: Vec<(&'a str, f64)>,
}

impl fmt::Display for Advice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranked: Vec<String> = self
            .ranked
            .iter()
            .take(3)
            .map(|(s, t)| format!("{s} {t:.2} ms"))
            .collect();
        let (at, measured) = match self.between {
            Some(q) => (
                format!(
                    "between 2^{} and 2^{}",
                    self.point.groups_log2, q.groups_log2
                ),
                "interpolated",
            ),
            None => (format!("at 2^{}", self.point.groups_log2), "measured"),
        };
        write!(
            f,
            "device profile: {at} {}{} groups {measured} {}",
            if self.point.skewed { "skewed " } else { "" },
            self.point.kind.name(),
            ranked.join(", ")
        )
    }
}

impl Profile {
    /// The point of `kind` and skew nearest to `groups` (within [`NEAR_LOG2`]), its
    /// strategies ranked. Between two points that disagree on the fastest strategy a crossover
    /// lies in between: each strategy measured at both is ranked by its time interpolated
    /// there (log time linear in log groups, as the regions' curves run on Karnagel's plots);
    /// the nearer point alone would put the crossover at the midpoint whatever the curves.
    /// Skewed keys take advice only from skewed points (a profile calibrated on uniform keys
    /// ranks shared tables first where hot keys make them the slowest).
    pub fn advise(&self, kind: KeyKind, skewed: bool, groups: u64) -> Option<Advice<'_>> {
        let at = (groups.max(1) as f64).log2();
        let near = |below: bool| {
            self.points
                .iter()
                .filter(|p| p.kind == kind && p.skewed == skewed && p.best().is_some())
                .map(|p| (p.groups_log2 as f64 - at, p))
                .filter(|(d, _)| d.abs() <= NEAR_LOG2 && (*d <= 0.0) == below)
                .min_by(|a, b| a.0.abs().total_cmp(&b.0.abs()))
        };
        let (point, between, mut ranked) = match (near(true), near(false)) {
            (Some((d, p)), _) if d.abs() < 0.25 => (p, None, p.measured().collect()),
            (Some((d, p)), Some((e, q))) if p.best().map(|b| b.0) != q.best().map(|b| b.0) => {
                // The weight of the upper point: the estimate's share of the way to it.
                let w = d.abs() / (d.abs() + e.abs());
                let below: Vec<(&str, f64)> = p.measured().collect();
                let ranked: Vec<(&str, f64)> = q
                    .measured()
                    .filter_map(|(s, tq)| {
                        let tp = below.iter().find(|b| b.0 == s)?.1;
                        Some((s, ((1.0 - w) * tp.ln() + w * tq.ln()).exp()))
                    })
                    .collect();
                let (near, far) = if w <= 0.5 { (p, q) } else { (q, p) };
                (near, Some(far), ranked)
            }
            (Some((d, p)), Some((e, q))) => {
                let p = if d.abs() < e.abs() { p } else { q };
                (p, None, p.measured().collect())
            }
            (Some((_, p)), None) | (None, Some((_, p))) => (p, None, p.measured().collect()),
            (None, None) => return None,
        };
        if ranked.is_empty() {
            return None;
        }
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        Some(Advice {
            point,
            between,
            ranked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(kind: KeyKind, log2: u32, ms: &[(&str, f64)]) -> Point {
        Point {
            kind,
            skewed: false,
            groups_log2: log2,
            ms: ms.iter().map(|(s, t)| (s.to_string(), *t)).collect(),
            shape: None,
        }
    }

    #[test]
    fn advises_the_nearest_point_of_the_kind() {
        let p = Profile {
            device: "test".into(),
            points: vec![
                point(
                    KeyKind::Hashed,
                    11,
                    &[("block_local", 2.0), ("global", 3.0)],
                ),
                point(
                    KeyKind::Hashed,
                    13,
                    &[("block_local", 4.0), ("global", 3.0)],
                ),
                point(KeyKind::Dense, 11, &[("perfect_shared", 1.0)]),
            ],
        };
        let a = p.advise(KeyKind::Hashed, false, 1 << 11).unwrap();
        assert_eq!(a.ranked[0].0, "block_local");
        let a = p.advise(KeyKind::Hashed, false, 1 << 13).unwrap();
        assert_eq!(a.ranked, vec![("global", 3.0), ("block_local", 4.0)]);
        // Between points that disagree: the times interpolated halfway (log scale).
        let a = p.advise(KeyKind::Hashed, false, 1 << 12).unwrap();
        assert_eq!(a.ranked[0].0, "block_local");
        assert!((a.ranked[0].1 - (2.0f64 * 4.0).sqrt()).abs() < 1e-12);
        assert!((a.ranked[1].1 - 3.0).abs() < 1e-12, "{:?}", a.ranked);
        assert!(a.to_string().contains("between 2^11 and 2^13"), "{a}");
        // Nearer one point, its times weigh more: at 2^12.5, 3/4 of the way to 2^13.
        let a = p
            .advise(KeyKind::Hashed, false, (2f64.powf(12.5)) as u64)
            .unwrap();
        assert_eq!(a.ranked[0].0, "global");
        assert_eq!(a.point.groups_log2, 13);
        let agree = Profile {
            device: "test".into(),
            points: vec![
                p.points[0].clone(),
                point(KeyKind::Hashed, 13, &[("block_local", 1.0)]),
            ],
        };
        let a = agree.advise(KeyKind::Hashed, false, 1 << 12).unwrap();
        assert_eq!(a.ranked[0].0, "block_local");
        // Too far from any point, or no point of the kind: the rules decide.
        assert!(p.advise(KeyKind::Hashed, false, 1 << 20).is_none());
        assert!(p.advise(KeyKind::Dense, false, 1 << 20).is_none());
        assert!(Profile::default()
            .advise(KeyKind::Dense, false, 1)
            .is_none());
        let text = p.advise(KeyKind::Dense, false, 2048).unwrap().to_string();
        assert!(
            text.contains("2^11 dense groups measured perfect_shared 1.00 ms"),
            "{text}"
        );
        // Skewed keys: only skewed points advise.
        assert!(p.advise(KeyKind::Hashed, true, 1 << 11).is_none());
        let mut skewed = p.clone();
        skewed.points.push(Point {
            skewed: true,
            ..point(
                KeyKind::Hashed,
                11,
                &[("global", 9.0), ("block_local", 1.0)],
            )
        });
        let a = skewed.advise(KeyKind::Hashed, true, 1 << 11).unwrap();
        assert_eq!(a.ranked[0].0, "block_local");
        assert!(a.to_string().contains("2^11 skewed hashed groups"), "{a}");
        assert_eq!(
            skewed
                .advise(KeyKind::Hashed, false, 1 << 13)
                .unwrap()
                .ranked[0]
                .0,
            "global"
        );
    }

    #[test]
    fn failed_strategies_never_win() {
        let p = point(KeyKind::Dense, 3, &[("a", f64::INFINITY), ("b", 5.0)]);
        assert_eq!(p.best(), Some(("b", 5.0)));
        assert_eq!(point(KeyKind::Dense, 3, &[]).best(), None);
    }
}
