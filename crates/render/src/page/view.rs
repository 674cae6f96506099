//! What the page's modules render alike (the main module and the GPU module
//! each run a yew app): the automation contract's run states (`data-run-state`,
//! `docs/url.md`) and values shared by pointer, cheap to pass as props.

use std::rc::Rc;

/// Where a run is (the page's, or the GPU view's). Mirrored on `document.body`
/// as `data-run-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunState {
    /// Nothing ran yet (or a saved report is shown).
    #[default]
    Idle,
    /// A run is going.
    Running,
    /// The run ended (requests may have failed: failures are data).
    Done,
    /// The run could not be made.
    Failed,
}

impl RunState {
    /// The `data-run-state` value.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Idle => "idle",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }
}

/// An `Rc` compared by pointer: cheap props for big values.
#[derive(Debug)]
pub struct Shared<T>(pub Rc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(Rc::clone(&self.0))
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Shared<T> {
    /// Wrap a value.
    pub fn new(v: T) -> Self {
        Shared(Rc::new(v))
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared::new(T::default())
    }
}
