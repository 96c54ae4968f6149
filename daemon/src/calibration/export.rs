//! A model as a file another host of the same hardware imports (`wattson calibration
//! export --format file`, `import`). The forms Home Assistant and Prometheus read are
//! [`crate::publish::calibration`]'s.

use serde::{Deserialize, Serialize};

use super::CalibrationError;
use super::model::{Hardware, WallModel};

/// The file `export --format file` writes and `import` reads.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// Always [`FILE_FORMAT`].
    pub format: String,
    pub version: u32,
    pub model: WallModel,
}

pub const FILE_FORMAT: &str = "wattson-calibration";
/// The most of a file `import` reads.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The model as the file another host imports.
pub fn file(model: &WallModel) -> String {
    let f = File {
        format: FILE_FORMAT.into(),
        version: 1,
        model: model.clone(),
    };
    serde_json::to_string_pretty(&f).unwrap_or_default() + "\n"
}

/// The model a file holds, for `host` whose hardware is `here`: checked whole, refused for
/// other hardware, marked as borrowed from the host it was fitted on.
pub fn import(text: &str, host: &str, here: &Hardware) -> Result<WallModel, CalibrationError> {
    let bad = |m: String| CalibrationError::BadInput(m);
    let f: File = serde_json::from_str(text)
        .map_err(|e| bad(format!("not a wattson calibration file: {e}")))?;
    if f.format != FILE_FORMAT || f.version != 1 {
        return Err(bad(format!(
            "format {:?} version {}: this wattson reads {FILE_FORMAT:?} version 1",
            f.format, f.version
        )));
    }
    let mut m = f.model;
    m.check()
        .map_err(|e| bad(format!("the model in it is not whole: {e}")))?;
    if let Some(why) = m.hardware.differs_from(here) {
        return Err(bad(format!(
            "fitted on {} with {why}: a model is only lent to the same hardware (fit one here \
             with a meter: `wattson calibration fit`)",
            m.host
        )));
    }
    if m.borrowed_from.is_none() && m.host != host {
        m.borrowed_from = Some(m.host.clone());
    }
    host.clone_into(&mut m.host);
    Ok(m)
}
