//! TPCx-BB-like streams and queries for ordered pipelines (the streaming queries Prasaad, Ramalingam, Rajan,
//! *Scaling Ordered Stream Processing on Shared-Memory Multicores*, evaluate): a deterministic generator of a
//! web clickstream and store sales, and Q1, Q2, Q3, Q4 and Q15 as pipelines of the built-in columnar
//! operators. `docs/tpcxbb.md` is the contract (schemas, generator, each query's exact result); the tests
//! check the pipelines against plain implementations of it.
//!
//! ```
//! use windgate_core::runtime::pipeline::PipelineOptions;
//! use windgate_core::tpcxbb::{GenOptions, Query, Table, generate};
//!
//! let (clicks, _sales) = generate(&GenOptions::new(5_000, 1)).unwrap();
//! let q = Query::Q4;
//! assert_eq!(q.table(), Table::Clickstream);
//! let out = q.pipeline().run(clicks[0].schema(), clicks, &PipelineOptions::default()).unwrap();
//! assert_eq!(out.schema.field(out.schema.fields().len() - 1).name(), "mean_rows");
//! ```

mod generate;
mod queries;
mod rng;

pub use generate::{
    GenOptions, START, category, clickstream, clickstream_schema, generate, price, store_sales,
    store_sales_schema,
};
pub use queries::{Query, Table};
