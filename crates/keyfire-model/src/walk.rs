//! Seeded random walks through a model, for the conformance tests: each step is one of the
//! steps the model offers in its state (those that change nothing included: the script must
//! then change nothing either).

use stateright::Model;

/// A small seeded generator (xorshift64*): the same seed, the same walk.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// One step of a walk: the step chosen among those `model` offers in `state` (for which
/// `keep` says yes), and the state after it (the same state when it changes nothing). A step
/// that changes something is chosen three times as often as one that does not. None when no
/// step is left.
pub fn next<M>(
    model: &M,
    state: &M::State,
    rng: &mut Rng,
    keep: impl Fn(&M::Action) -> bool,
) -> Option<(M::Action, M::State)>
where
    M: Model,
    M::State: Clone,
    M::Action: Clone,
{
    let mut actions = Vec::new();
    model.actions(state, &mut actions);
    let mut weighted: Vec<(M::Action, M::State)> = Vec::new();
    for a in actions.into_iter().filter(|a| keep(a)) {
        match model.next_state(state, a.clone()) {
            Some(next) => {
                for _ in 0..3 {
                    weighted.push((a.clone(), next.clone()));
                }
            }
            None => weighted.push((a, state.clone())),
        }
    }
    if weighted.is_empty() {
        return None;
    }
    let i = rng.below(weighted.len());
    Some(weighted.swap_remove(i))
}
