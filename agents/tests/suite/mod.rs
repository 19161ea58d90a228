mod commands;
mod config;
mod fixture;
mod providers;
mod registry;
mod tools;
