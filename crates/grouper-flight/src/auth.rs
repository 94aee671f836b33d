//! The optional bearer token: with one set, every call must carry `authorization: Bearer
//! <token>` (ADBC's `adbc.flight.sql.authorization_header`, JDBC's `token`). Checked once for
//! every call, before the Flight SQL service sees it, so no call can forget it.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The token check (none when the server has no token).
#[derive(Clone)]
pub(crate) struct Bearer(Option<Arc<[u8]>>);

impl Bearer {
    pub(crate) fn new(token: Option<&str>) -> Bearer {
        Bearer(token.map(|t| Arc::from(t.as_bytes())))
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(token) = &self.0 else {
            return Ok(request);
        };
        let Some(header) = request.metadata().get("authorization") else {
            return Err(Status::unauthenticated(
                "this server needs a token: send the header 'authorization: Bearer <token>'",
            ));
        };
        let given = header
            .to_str()
            .ok()
            .and_then(|h| h.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim().as_bytes());
        match given {
            Some(t) if same(t, token) => Ok(request),
            Some(_) => Err(Status::unauthenticated("wrong token")),
            None => Err(Status::unauthenticated(
                "the authorization header must be 'Bearer <token>'",
            )),
        }
    }
}

/// Equal bytes, in a time that does not depend on where they first differ (a token compared
/// byte by byte and stopping early tells a prober, by its timing, how much of a guess is right).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(bearer: &mut Bearer, header: Option<&str>) -> Result<(), tonic::Code> {
        let mut request = Request::new(());
        if let Some(h) = header {
            request
                .metadata_mut()
                .insert("authorization", h.parse().unwrap());
        }
        bearer.call(request).map(|_| ()).map_err(|s| s.code())
    }

    #[test]
    fn only_the_token_gets_in() {
        let mut open = Bearer::new(None);
        assert_eq!(call(&mut open, None), Ok(()));
        let mut closed = Bearer::new(Some("s3cret"));
        assert_eq!(call(&mut closed, Some("Bearer s3cret")), Ok(()));
        assert_eq!(call(&mut closed, Some("bearer s3cret")), Ok(()));
        let denied = Err(tonic::Code::Unauthenticated);
        for wrong in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            assert_eq!(call(&mut closed, wrong), denied, "{wrong:?}");
        }
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }
}
