//! A wrapper that keeps a value out of its owner's identity.

/// State left out of its owner's identity (`Hash`, `Eq`): the model
/// checker compares whole nodes, and state that only records (counters:
/// otherwise every discarded duplicate would make a new state) or that is
/// an index over other state (the queue of frames owed an answer, whose
/// live entries are exactly the slots' and the tick's own order numbers)
/// would split one protocol state into many.
#[derive(Clone, Debug, Default)]
pub(crate) struct Unhashed<T>(pub T);

impl<T> core::hash::Hash for Unhashed<T> {
    fn hash<H: core::hash::Hasher>(&self, _: &mut H) {}
}

impl<T> PartialEq for Unhashed<T> {
    fn eq(&self, _: &Unhashed<T>) -> bool {
        true
    }
}

impl<T> Eq for Unhashed<T> {}

impl<T> core::ops::Deref for Unhashed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> core::ops::DerefMut for Unhashed<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
