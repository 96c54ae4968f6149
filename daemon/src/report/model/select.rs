//! Which configurations a report covers: `--configs` names, matched exactly, in order.

use super::ReportError;
use crate::report::input::ConfigInput;

/// Selects `wanted` (exact names, in that order) from `configs`; empty keeps all.
pub fn select_configs(
    configs: &[ConfigInput],
    wanted: &[String],
) -> Result<Vec<ConfigInput>, ReportError> {
    if wanted.is_empty() {
        return Ok(configs.to_vec());
    }
    wanted
        .iter()
        .map(|w| {
            configs
                .iter()
                .find(|c| &c.name == w)
                .cloned()
                .ok_or_else(|| ReportError::UnknownConfig {
                    name: w.clone(),
                    known: known_names(configs),
                })
        })
        .collect()
}

pub(super) fn known_names(configs: &[ConfigInput]) -> String {
    if configs.is_empty() {
        return "none".to_string();
    }
    configs
        .iter()
        .map(|c| format!("{:?}", c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves a `--configs` list typed by a user into exact names. Names may themselves hold
/// commas ("2x Opteron 2.2 GHz, 6 disks"), so the pieces between commas are joined back
/// greedily: the longest run of pieces that names a configuration (exactly, else as a
/// case-insensitive prefix of exactly one name) wins.
pub fn resolve_config_list(list: &str, names: &[String]) -> Result<Vec<String>, ReportError> {
    let pieces: Vec<&str> = list.split(',').collect();
    let find = |text: &str| -> Option<String> {
        let t = text.trim();
        if t.is_empty() {
            return None;
        }
        if let Some(n) = names.iter().find(|n| n.as_str() == t) {
            return Some(n.clone());
        }
        let lower = t.to_lowercase();
        let mut hits = names
            .iter()
            .filter(|n| n.to_lowercase().starts_with(&lower));
        match (hits.next(), hits.next()) {
            (Some(n), None) => Some(n.clone()),
            _ => None,
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        if pieces[i].trim().is_empty() {
            i += 1;
            continue;
        }
        let hit = (i + 1..=pieces.len())
            .rev()
            .find_map(|j| find(&pieces[i..j].join(",")).map(|n| (j, n)));
        match hit {
            Some((j, n)) => {
                if !out.contains(&n) {
                    out.push(n);
                }
                i = j;
            }
            None => {
                return Err(ReportError::UnknownConfig {
                    name: pieces[i].trim().to_string(),
                    known: if names.is_empty() {
                        "none".to_string()
                    } else {
                        names
                            .iter()
                            .map(|n| format!("{n:?}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                });
            }
        }
    }
    Ok(out)
}
