pub fn x() {}

pub mod analyze;
