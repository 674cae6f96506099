//! The kernels report rendered: the per-kernel table and the labels every view
//! shows (the CLI, the combined report, the page's GPU view), the decode floors
//! named the same everywhere, and the whole report as text for the terminal
//! (`tokenscope kernels`).

mod compare;
mod floor;
mod labels;
mod text;
mod tuning;

pub use compare::{compare_html, compare_markdown, compare_table, compare_text};
pub use floor::{
    FLOOR_AT_READ, FLOOR_WITH_KERNELS, floor_legend, floor_table, gguf_file_text, gguf_floor_text,
};
pub use labels::{
    kernel_shape_label, kernel_table, mib_label, roof_label, shape_label, variant_label,
    verified_label,
};
pub use text::{text, user_text};
pub use tuning::{VariantCounts, own_search};
