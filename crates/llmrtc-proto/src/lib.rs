//! Sans-IO llmrtc voice-AI protocol v1 (work in progress on this branch).
