//! `oaectl`, the control tool for running dataplanes (status, stats, verbs,
//! regions, fault injection). Not built yet: there is no running dataplane to
//! talk to until the dataplane exists.
