//! The library's acceptance tests: nodes, clients and the store against real redis-server
//! processes (`keyfire_testkit`). One test binary made of modules, so it links once; it is
//! also the node process the crash tests start (`node_process`).

mod backfill;
mod batching;
mod bulk;
mod calendars;
mod cancel;
mod changes;
mod compact;
mod crash;
mod cutoff;
mod debounce;
mod dedup;
mod due_pages;
mod fanin;
mod faults;
mod firing;
mod flow_control;
mod input;
mod ledger;
mod lifecycle;
mod limits;
mod node_process;
mod policies;
mod precision;
mod retries;
mod run_limits;
mod scaleout;
mod scripts;
mod upgrade;
