pub fn x() {}
pub mod logicalize;
