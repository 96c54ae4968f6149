//! `wattson report`: annual running cost per configuration and mode, comparisons, savings
//! and payback, and this machine's measured against its modelled cost.
//!
//! The flow is [`input::ReportInput`] (plain data from the config file and the store) ->
//! [`model::build`] -> [`model::Report`] (the numbers, serialisable as the JSON contract)
//! -> [`render::render`] in one of [`render::Format`]. Units: W, kWh per 365-day year, the
//! tariff's currency per year.

pub mod idle;
pub mod input;
pub mod measured;
pub mod model;
pub mod render;
pub mod tariffs;

pub use input::{
    ConfigInput, ConfigKind, ConfigStatus, FitInput, GpuInput, GpuPoint, LevelInput, MeasuredInput,
    ModeInput, ReportInput, ReportOptions,
};
pub use model::{Report, ReportError, build};
pub use render::{Format, RenderError, render};
