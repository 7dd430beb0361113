//! The README's quick start, `keyfire dev`, shows firings.

use crate::support::run_keyfire_dev;

#[test]
fn keyfire_dev_shows_firings_until_stopped() {
    run_keyfire_dev(&[]);
}
