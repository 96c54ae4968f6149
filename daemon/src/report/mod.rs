//! `wattson report`: annual running cost per configuration and mode, comparisons, savings
//! and payback, and this machine's measured against its modelled cost.
//!
//! The flow is a [`ReportRequest`] (the options asked for: `wattson report`'s, or the HTTP
//! report's query) -> [`input::ReportInput`] (plain data from the config file and, through
//! [`gather`], the store) -> [`model::build`] -> [`model::Report`] (the numbers,
//! serialisable as the JSON contract) -> [`render::render`] in one of [`render::Format`];
//! [`produce`] runs it all. Units: W, kWh per 365-day year, the
//! tariff's currency per year.

pub mod error;
pub mod gather;
pub mod idle;
pub mod input;
pub mod measured;
pub mod model;
pub mod real_tariffs;
pub mod render;
pub mod request;
pub mod sleep;

pub use error::ProduceError;
pub use input::{
    ConfigInput, ConfigKind, ConfigStatus, FitInput, GpuInput, GpuPoint, LevelInput, MeasuredInput,
    ModeInput, Paired, ReportInput, ReportOptions,
};
pub use model::{Report, ReportError, build};
pub use render::{Format, RenderError, render};
pub use request::{
    ReportRequest, When, input_from_config, parse_when, produce, produce_noting, resolve_when,
};
