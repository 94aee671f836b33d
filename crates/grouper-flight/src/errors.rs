//! DataFusion's and grouper's errors as gRPC statuses: one line of text (the error and its
//! causes, as the shell prints them), and a code a client can act on. ADBC raises
//! `ProgrammingError` for `InvalidArgument` (the statement is wrong: syntax, an unknown table or
//! column, a type mismatch, a division by zero), `NotSupportedError` for `Unimplemented`,
//! `OperationalError` for `ResourceExhausted`, and `InternalError` for `Internal` (the server or
//! its files failed).

use datafusion::error::DataFusionError;
use tonic::{Code, Status};

/// `e` as a status.
pub(crate) fn status(e: anyhow::Error) -> Status {
    let code = match e
        .downcast_ref::<DataFusionError>()
        .map(DataFusionError::find_root)
    {
        Some(DataFusionError::NotImplemented(_)) => Code::Unimplemented,
        Some(DataFusionError::ResourcesExhausted(_)) => Code::ResourceExhausted,
        Some(
            DataFusionError::Internal(_)
            | DataFusionError::IoError(_)
            | DataFusionError::ObjectStore(_)
            | DataFusionError::External(_),
        ) => Code::Internal,
        _ => Code::InvalidArgument,
    };
    Status::new(code, grouper_shell::one_line(&e))
}

/// An error from planning SQL as a status: a path in FROM that matches no file is said as
/// such (DataFusion reports it as an unknown table).
pub(crate) fn planning(e: DataFusionError) -> Status {
    status(grouper_shell::tables::missing_file(e))
}

/// A DataFusion error as a status.
pub(crate) fn datafusion(e: DataFusionError) -> Status {
    status(e.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn statements_wrong_are_invalid_arguments_on_one_line() {
        let ctx = datafusion::prelude::SessionContext::new();
        for (sql, says) in [
            ("SELEC 1", "SELEC"),
            ("SELECT * FROM nowhere", "nowhere"),
            ("SELECT nope FROM (SELECT 1 AS a)", "nope"),
        ] {
            let e = ctx.sql(sql).await.unwrap_err();
            let s = datafusion(e);
            assert_eq!(s.code(), Code::InvalidArgument, "{sql}: {s:?}");
            assert!(
                s.message().contains(says) && !s.message().contains('\n'),
                "{s:?}"
            );
        }
        let e = DataFusionError::ResourcesExhausted("memory".into());
        assert_eq!(datafusion(e).code(), Code::ResourceExhausted);
        let e = DataFusionError::Context(
            "planning".into(),
            Box::new(DataFusionError::NotImplemented("x".into())),
        );
        assert_eq!(datafusion(e).code(), Code::Unimplemented);
    }
}
