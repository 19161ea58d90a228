mod config;
mod fixture;
mod registry;
