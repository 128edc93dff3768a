//! The per-session certificate authority that signs the leaf certificates of intercepted hosts.
//!
//! The key pair is generated in memory at start and dropped with the proxy: it is never
//! written anywhere, so a certificate minted by it is worthless outside this session. Only the
//! CA certificate (`cert_pem`) leaves, for the launcher's trust bundle.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use hudsucker::certificate_authority::{CertificateAuthority, RcgenAuthority};
use hudsucker::hyper::http::uri::Authority;
use hudsucker::rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use hudsucker::rustls::ServerConfig;
use hudsucker::rustls::crypto::{CryptoProvider, aws_lc_rs};
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::policy::Host;

/// Leaf configurations kept for IP-literal hosts (names are cached by `RcgenAuthority`).
const IP_CACHE_MAX: usize = 256;
const NAME_CACHE_MAX: u64 = 1_000;

#[derive(Debug, thiserror::Error)]
#[error("cannot create the session CA: {0}")]
pub struct CaError(String);

pub(crate) struct SessionCa {
    pub cert_pem: String,
    names: RcgenAuthority,
    // rcgen's authority always writes a DNS SAN, which clients reject for an address; listed
    // IP literals get their own leaf with an IP SAN, signed by the same key.
    ip_issuer: Issuer<'static, KeyPair>,
    ip_cache: Mutex<HashMap<IpAddr, Arc<ServerConfig>>>,
    provider: Arc<CryptoProvider>,
}

fn err(e: impl std::fmt::Display) -> CaError {
    CaError(e.to_string())
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "agent-sandbox session CA");
    dn.push(DnType::OrganizationName, "agent-sandbox");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(365);
    params
}

impl SessionCa {
    pub fn generate() -> Result<SessionCa, CaError> {
        let key = KeyPair::generate().map_err(err)?;
        let params = ca_params();
        let cert_pem = params.self_signed(&key).map_err(err)?.pem();
        let key_der = key.serialize_der();
        let second_key = KeyPair::try_from(key_der.as_slice()).map_err(err)?;
        let provider = aws_lc_rs::default_provider();
        let names = RcgenAuthority::new(
            Issuer::new(params.clone(), key),
            NAME_CACHE_MAX,
            provider.clone(),
        );
        Ok(SessionCa {
            cert_pem,
            names,
            ip_issuer: Issuer::new(params, second_key),
            ip_cache: Mutex::new(HashMap::new()),
            provider: Arc::new(provider),
        })
    }

    /// TLS configuration presenting a leaf for `host` (the CONNECT host, never the SNI: the
    /// client must validate the certificate of the host its tunnel was checked for).
    pub async fn server_config(&self, host: &Host) -> Result<Arc<ServerConfig>, CaError> {
        match host {
            Host::Name(name) => {
                let authority = Authority::try_from(name.as_str()).map_err(err)?;
                Ok(self.names.gen_server_config(&authority).await)
            }
            Host::Ip(ip) => {
                if let Some(cfg) = self.ip_cache.lock().expect("ip cache").get(ip) {
                    return Ok(cfg.clone());
                }
                let cfg = self.ip_leaf(*ip)?;
                let mut cache = self.ip_cache.lock().expect("ip cache");
                if cache.len() >= IP_CACHE_MAX {
                    cache.clear();
                }
                cache.insert(*ip, cfg.clone());
                Ok(cfg)
            }
        }
    }

    fn ip_leaf(&self, ip: IpAddr) -> Result<Arc<ServerConfig>, CaError> {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, ip.to_string());
        params.distinguished_name = dn;
        params.subject_alt_names = vec![SanType::IpAddress(ip)];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(30);
        let cert = params.signed_by(&key, &self.ip_issuer).map_err(err)?;
        let key_der = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key_der)
            .map_err(err)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}
