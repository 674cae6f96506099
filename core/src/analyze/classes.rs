//! Goodput per class of request: a mixed workload's classes (a prompts file's
//! `"class"`), each held to its own SLOs (`--slo-class`; the run's `--slo`
//! where it has none), counted per level.

use std::collections::BTreeMap;

use crate::analyze::slo::{Slo, SloClass};
use crate::model::ClassReport;

/// A level's requests per class: sent, successful, and those that met their
/// class's SLOs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClassesAcc {
    by_class: BTreeMap<String, (u64, u64, u64)>,
}

impl ClassesAcc {
    /// A measured request of `class` was sent.
    pub(crate) fn sent(&mut self, class: &str) {
        self.entry(class).0 += 1;
    }

    /// A successful request of `class`, which did or did not meet its SLOs.
    pub(crate) fn ok(&mut self, class: &str, met: bool) {
        let e = self.entry(class);
        e.1 += 1;
        e.2 += u64::from(met);
    }

    fn entry(&mut self, class: &str) -> &mut (u64, u64, u64) {
        if !self.by_class.contains_key(class) {
            self.by_class.insert(class.to_owned(), (0, 0, 0));
        }
        self.by_class.get_mut(class).expect("inserted")
    }

    /// One report per class seen, by name, each with the SLOs it was held to.
    pub(crate) fn finish(self, classes: &[SloClass], run: &[Slo]) -> Vec<ClassReport> {
        self.by_class
            .into_iter()
            .map(|(class, (sent, ok, met))| ClassReport {
                slos: SloClass::slos_for(classes, Some(&class), run)
                    .iter()
                    .map(Slo::label)
                    .collect(),
                class,
                sent,
                ok,
                met,
                met_fraction: if sent == 0 {
                    0.0
                } else {
                    met as f64 / sent as f64
                },
            })
            .collect()
    }
}

/// Two shards' reports of one level's classes, summed class by class.
pub fn merge_classes(parts: &[&[ClassReport]]) -> Vec<ClassReport> {
    let mut by: BTreeMap<String, ClassReport> = BTreeMap::new();
    for c in parts.iter().flat_map(|p| p.iter()) {
        let e = by.entry(c.class.clone()).or_insert_with(|| ClassReport {
            sent: 0,
            ok: 0,
            met: 0,
            met_fraction: 0.0,
            ..c.clone()
        });
        e.sent += c.sent;
        e.ok += c.ok;
        e.met += c.met;
        e.met_fraction = if e.sent == 0 {
            0.0
        } else {
            e.met as f64 / e.sent as f64
        };
    }
    by.into_values().collect()
}
