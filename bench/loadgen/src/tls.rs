//! The bench's own CA and TLS configurations (ring provider; nothing here is what we measure).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::Result;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `DIR/ca.pem`, `DIR/server.pem`, `DIR/server.key`: a throwaway CA and a leaf for
/// 127.0.0.1 and localhost, valid for two days.
pub fn write_certs(dir: &Path) -> Result<u8> {
    std::fs::create_dir_all(dir)?;
    let today = std::time::SystemTime::now();
    let not_before = today - std::time::Duration::from_secs(3600);
    let not_after = today + std::time::Duration::from_secs(2 * 86400);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "agent-sandbox bench CA");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before.into();
    ca.not_after = not_after.into();
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "127.0.0.1");
    leaf.distinguished_name = dn;
    leaf.subject_alt_names = vec![
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SanType::DnsName("localhost".try_into()?),
    ];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.use_authority_key_identifier_extension = true;
    leaf.not_before = not_before.into();
    leaf.not_after = not_after.into();
    let cert = leaf.signed_by(&key, &issuer)?;

    std::fs::write(dir.join("ca.pem"), ca_pem)?;
    std::fs::write(dir.join("server.pem"), cert.pem())?;
    std::fs::write(dir.join("server.key"), key.serialize_pem())?;
    Ok(0)
}

pub fn server_config(cert: &str, key: &str) -> Result<Arc<ServerConfig>> {
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<std::result::Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A client trusting exactly the certificates in `ca_files`, offering one ALPN protocol.
pub fn client_config(ca_files: &[String], alpn: &[u8]) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for f in ca_files {
        for cert in CertificateDer::pem_file_iter(f)? {
            // A system bundle may hold a certificate rustls cannot use: skip it.
            let _ = roots.add(cert?);
        }
    }
    if roots.is_empty() {
        return Err("no CA certificate to trust (--ca / --ca-env)".into());
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Ok(Arc::new(cfg))
}
