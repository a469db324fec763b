
mod analyze;
