//! Test helpers: conversation builders, proptest generators and the context shape renderer.
