//! What every subcommand measures and reports: a case, Gossamer's figure beside its peers', and
//! the output rows `{"case", "unit", "higher_is_better", "gsm", "peer", "peer_value", "speedup"}`.
//!
//! A row pairs Gossamer's median for a case with one peer's median from the same run; a case with
//! several peers gives several rows. `speedup` > 1 always means Gossamer did better, whatever the
//! unit's direction. Printing, JSON files and charts are `report` and `plot`.

use crate::stats::Summary;
use serde::Serialize;

/// One figure (Gossamer's or a peer's) as measured over several runs.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Who produced it, e.g. `"parking_lot::Mutex"`.
    pub name: String,
    /// Its median and spread; `None` when it was not measured in this build or run.
    pub summary: Option<Summary>,
}

/// One benchmark case: Gossamer's figure beside its peers'.
#[derive(Debug, Clone)]
pub struct Case {
    /// Short name of what is measured, e.g. `"counter: apply_then"`.
    pub case: String,
    /// Unit of every figure in the case, e.g. `"Mops/s"` or `"ns"`.
    pub unit: String,
    /// Whether a larger figure is better (throughput) or worse (time, latency).
    pub higher_is_better: bool,
    /// Gossamer's figure; `None` when the Gossamer side was not built or not run.
    pub gsm: Option<Summary>,
    /// The peers measured in the same run.
    pub peers: Vec<Figure>,
}

/// One output row, exactly the JSON schema the subcommands share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub case: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub gsm: Option<f64>,
    pub peer: Option<String>,
    pub peer_value: Option<f64>,
    pub speedup: Option<f64>,
}

/// How many times better Gossamer did than the peer: `gsm / peer` when higher is better,
/// `peer / gsm` when lower is better. `None` when either is missing, zero or not finite.
pub fn speedup(gsm: f64, peer: f64, higher_is_better: bool) -> Option<f64> {
    let (num, den) = if higher_is_better {
        (gsm, peer)
    } else {
        (peer, gsm)
    };
    let ratio = num / den;
    (num.is_finite() && den.is_finite() && den > 0.0 && ratio.is_finite()).then_some(ratio)
}

impl Case {
    /// The rows of this case: one per peer, or one with no peer when there are none.
    pub fn rows(&self) -> Vec<Row> {
        let gsm = self.gsm.map(|s| s.median);
        let row = |peer: Option<&Figure>| {
            let peer_value = peer.and_then(|p| p.summary).map(|s| s.median);
            Row {
                case: self.case.clone(),
                unit: self.unit.clone(),
                higher_is_better: self.higher_is_better,
                gsm,
                peer: peer.map(|p| p.name.clone()),
                peer_value,
                speedup: match (gsm, peer_value) {
                    (Some(g), Some(p)) => speedup(g, p, self.higher_is_better),
                    _ => None,
                },
            }
        };
        if self.peers.is_empty() {
            vec![row(None)]
        } else {
            self.peers.iter().map(|p| row(Some(p))).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn speedup_above_one_means_gossamer_did_better_for_throughput() {
        assert_eq!(speedup(30.0, 10.0, true), Some(3.0));
        assert_eq!(speedup(5.0, 10.0, true), Some(0.5));
    }

    #[test]
    fn speedup_is_inverted_for_lower_is_better_units() {
        // Gossamer took 0.1 s, the peer 0.3 s: Gossamer is 3× better.
        let s = speedup(0.1, 0.3, false).unwrap();
        assert!((s - 3.0).abs() < 1e-12);
        assert_eq!(speedup(0.4, 0.2, false), Some(0.5));
    }

    #[test]
    fn speedup_of_degenerate_figures_is_absent() {
        assert_eq!(speedup(1.0, 0.0, true), None);
        assert_eq!(speedup(0.0, 1.0, false), None);
        assert_eq!(speedup(f64::NAN, 1.0, true), None);
    }

    #[test]
    fn a_case_gives_one_row_per_peer_with_the_shared_schema() {
        let case = Case {
            case: "launch".into(),
            unit: "s".into(),
            higher_is_better: false,
            gsm: summarize(&[0.1; 5]),
            peers: vec![
                Figure {
                    name: "mpirun".into(),
                    summary: summarize(&[0.3; 5]),
                },
                Figure {
                    name: "other".into(),
                    summary: None,
                },
            ],
        };
        let rows = case.rows();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].peer.as_deref(), Some("mpirun"));
        assert!((rows[0].speedup.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(rows[1].speedup, None);
        let json: serde_json::Value = serde_json::to_value(&rows[0]).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "case",
                "gsm",
                "higher_is_better",
                "peer",
                "peer_value",
                "speedup",
                "unit"
            ]
        );
    }

    #[test]
    fn a_case_without_peers_still_gives_a_row() {
        let case = Case {
            case: "x".into(),
            unit: "ns".into(),
            higher_is_better: false,
            gsm: None,
            peers: vec![],
        };
        let rows = case.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].peer, None);
        assert_eq!(rows[0].gsm, None);
    }
}
