//! Import from an OpenClaw state folder and export to OpenClaw-compatible JSONL (being written).
