pub fn x() {}

pub mod trace;
