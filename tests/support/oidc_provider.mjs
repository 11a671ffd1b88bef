// A real OpenID provider (the npm package oidc-provider) on loopback, for tests that exercise
// gpuplane's OIDC login against something that is not gpuplane's own code.
//
//   node tests/support/oidc_provider.mjs --port-file FILE --client-secret SECRET --other-secret SECRET2
//
// Listens on 127.0.0.1 with an ephemeral port; once listening it writes the issuer URL
// ("http://127.0.0.1:<port>", no trailing slash) to FILE atomically (tmp file + rename).
// Logs go to stderr. SIGTERM/SIGINT shut it down cleanly.
//
// Clients (all confidential, client_secret_basic, authorization_code + PKCE S256 required):
//   gpuplane     secret SECRET,  ID tokens RS256
//   other        secret SECRET2, ID tokens RS256 (a different audience)
//   gpuplane-es  secret SECRET,  ID tokens ES256
// Their redirect URIs are http://127.0.0.1/v1/auth/oidc/test/callback and http://127.0.0.1/cb;
// as native (application_type "native") clients any port is accepted on those loopback URIs
// (RFC 8252 section 7.3; oidc-provider's Client#redirectUriAllowed strips the loopback port).
//
// Accounts: alice, bob, carol, dave (see ACCOUNTS). There is no login page: GET /interaction/:uid
// logs in as the account chosen by the latest POST /test/next-login?account=NAME (alice by
// default), grants everything requested and answers 303 to the authorization resume URL.
// POST /test/id-token-ttl?seconds=N sets the lifetime of ID tokens issued afterwards (3600).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { renameSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const log = (...parts) => console.error('oidc_provider:', ...parts);

let args;
try {
  ({ values: args } = parseArgs({
    options: {
      'port-file': { type: 'string' },
      'client-secret': { type: 'string' },
      'other-secret': { type: 'string' },
    },
    strict: true,
  }));
} catch (err) {
  log(err.message);
  process.exit(2);
}
for (const name of ['port-file', 'client-secret', 'other-secret']) {
  if (!args[name]) {
    log(`missing --${name}`);
    log('usage: node tests/support/oidc_provider.mjs --port-file FILE --client-secret SECRET --other-secret SECRET2');
    process.exit(2);
  }
}

// Signal handlers first, so that a SIGTERM during startup also exits cleanly (status 0).
let server;
let stopping = false;
function shutdown(signal) {
  if (stopping) return;
  stopping = true;
  log(`${signal}: shutting down`);
  if (!server?.listening) process.exit(0);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

// Imported dynamically (after the handlers above: loading it takes most of the startup time),
// with a hint when the npm dependencies are missing.
let Provider;
try {
  ({ default: Provider } = await import('oidc-provider'));
} catch (err) {
  log(`cannot load oidc-provider (${err.code || err.message}); run \`npm ci\` in the repository root (scripts/setup.sh does)`);
  process.exit(2);
}

const ACCOUNTS = {
  alice: {
    preferred_username: 'alice',
    email: 'alice@acme.example',
    email_verified: true,
    name: 'Alice Admin',
    groups: ['acme-admins'],
  },
  bob: {
    preferred_username: 'bob',
    email: 'bob@beta.example',
    email_verified: true,
    name: 'Bob Beta',
    groups: ['beta-admins'],
  },
  carol: {
    preferred_username: 'carol',
    email: 'carol@acme.example',
    email_verified: true,
    name: 'Carol Nobody',
    groups: ['nobody'],
  },
  dave: {
    preferred_username: 'dave',
    email: 'dave@acme.example',
    email_verified: true,
    name: 'Dave ML',
    groups: ['acme-ml'],
  },
};

// Mutable test knobs (POST /test/...).
let nextLogin = 'alice';
let idTokenTtl = 3600;

// Signing keys, fresh per start: one RSA key (RS256) and one EC P-256 key (ES256).
function signingJwk(type, options, kid) {
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig' };
}
const jwks = {
  keys: [
    signingJwk('rsa', { modulusLength: 2048 }, `rsa-${randomBytes(6).toString('hex')}`),
    signingJwk('ec', { namedCurve: 'P-256' }, `ec-${randomBytes(6).toString('hex')}`),
  ],
};

// A minimal in-memory adapter (the package's own one prints a development-only warning).
class MemoryAdapter {
  static store = new Map(); // "Model:id" -> { payload, expiresAt (ms) | undefined }

  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  static get(key) {
    const entry = MemoryAdapter.store.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= Date.now()) {
      MemoryAdapter.store.delete(key);
      return undefined;
    }
    return entry.payload;
  }

  async upsert(id, payload, expiresIn) {
    const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : undefined;
    MemoryAdapter.store.set(this.key(id), { payload: { ...payload }, expiresAt });
    // Secondary indexes share the primary entry's lifetime.
    if (payload.uid) MemoryAdapter.store.set(`${this.model}:uid:${payload.uid}`, { payload: id, expiresAt });
    if (payload.userCode) MemoryAdapter.store.set(`${this.model}:userCode:${payload.userCode}`, { payload: id, expiresAt });
    if (payload.grantId) {
      const gkey = `grant:${payload.grantId}`;
      const list = MemoryAdapter.get(gkey) || [];
      list.push(this.key(id));
      MemoryAdapter.store.set(gkey, { payload: list, expiresAt: undefined });
    }
  }

  async find(id) {
    const payload = MemoryAdapter.get(this.key(id));
    return payload === undefined ? undefined : structuredClone(payload);
  }

  async findByUid(uid) {
    const id = MemoryAdapter.get(`${this.model}:uid:${uid}`);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = MemoryAdapter.get(`${this.model}:userCode:${userCode}`);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const payload = MemoryAdapter.get(this.key(id));
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    MemoryAdapter.store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    const gkey = `grant:${grantId}`;
    for (const key of MemoryAdapter.get(gkey) || []) MemoryAdapter.store.delete(key);
    MemoryAdapter.store.delete(gkey);
  }
}

const REDIRECT_URIS = ['http://127.0.0.1/v1/auth/oidc/test/callback', 'http://127.0.0.1/cb'];
const client = (clientId, secret, alg) => ({
  client_id: clientId,
  client_secret: secret,
  // "native" makes http loopback redirect URIs match on any port (RFC 8252 section 7.3).
  application_type: 'native',
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['authorization_code'],
  response_types: ['code'],
  redirect_uris: REDIRECT_URIS,
  id_token_signed_response_alg: alg,
});

const configuration = {
  adapter: MemoryAdapter,
  clients: [
    client('gpuplane', args['client-secret'], 'RS256'),
    client('other', args['other-secret'], 'RS256'),
    client('gpuplane-es', args['client-secret'], 'ES256'),
  ],
  jwks,
  responseTypes: ['code'],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 supports
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  // Put the scope-granted claims in the ID token itself, not only in userinfo.
  conformIdTokenClaims: false,
  async findAccount(ctx, id) {
    const account = ACCOUNTS[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, ...structuredClone(account) };
      },
    };
  },
  features: {
    devInteractions: { enabled: false },
  },
  interactions: {
    // Absolute, so that the 303 from the authorization endpoint carries an absolute Location.
    url(ctx, interaction) {
      return `${ctx.oidc.provider.issuer}/interaction/${interaction.uid}`;
    },
  },
  cookies: {
    keys: [randomBytes(32).toString('base64url')],
    long: { httpOnly: true, sameSite: 'lax', secure: false },
    short: { httpOnly: true, sameSite: 'lax', secure: false },
  },
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    ClientCredentials: 600,
    DeviceCode: 600,
    BackchannelAuthenticationRequest: 600,
    PreAuthorizedCode: 600,
    Grant: 3600,
    IdToken: () => idTokenTtl,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
  async renderError(ctx, out, error) {
    ctx.type = 'application/json';
    ctx.body = out;
    log(`error page: ${JSON.stringify(out)}${error?.stack && !error.expose ? `\n${error.stack}` : ''}`);
  },
};

server = createServer();
server.listen(0, '127.0.0.1');
await new Promise((resolve, reject) => {
  server.once('listening', resolve);
  server.once('error', reject);
});
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, configuration);
provider.proxy = false;

for (const event of ['server_error', 'authorization.error', 'grant.error', 'introspection.error', 'userinfo.error']) {
  provider.on(event, (ctx, err) => log(`${event}: ${err?.name}: ${err?.message}${err?.error_detail ? ` (${err.error_detail})` : ''}`));
}

// Completes an interaction without a UI: log in as nextLogin and grant what was asked for.
async function completeInteraction(ctx, uid) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== uid) {
    ctx.status = 400;
    ctx.body = { error: 'interaction cookie does not match the interaction URL' };
    return;
  }
  const accountId = nextLogin;
  const { params, prompt } = details;

  // A session left over from an earlier login in the same cookie jar belongs to another
  // account: drop it, so that this login starts a fresh session instead of oidc-provider's
  // logout-confirmation form.
  if (details.session?.accountId && details.session.accountId !== accountId) {
    const session = await provider.Session.findByUid(details.session.uid);
    if (session) await session.destroy();
    delete details.session;
    delete details.grantId;
    await details.save(details.exp - Math.floor(Date.now() / 1000));
  }

  let grant;
  if (details.grantId && details.session?.accountId === accountId) {
    grant = await provider.Grant.find(details.grantId);
  }
  grant ||= new provider.Grant({ accountId, clientId: params.client_id });

  if (params.scope) grant.addOIDCScope(params.scope);
  const claims = new Set(prompt?.details?.missingOIDCClaims || []);
  if (params.claims) {
    try {
      const requested = JSON.parse(params.claims);
      for (const target of ['id_token', 'userinfo']) {
        for (const name of Object.keys(requested?.[target] || {})) claims.add(name);
      }
    } catch {
      // oidc-provider has already validated the parameter; nothing else to add.
    }
  }
  if (claims.size) grant.addOIDCClaims([...claims]);
  for (const [indicator, scopes] of Object.entries(prompt?.details?.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();

  const result = {
    login: { accountId, remember: true },
    consent: { grantId },
  };
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
  log(`interaction ${uid}: ${accountId} logged in for ${params.client_id} (${params.scope})`);
  // What provider.interactionFinished does, through Koa.
  ctx.status = 303;
  ctx.set('Location', returnTo);
  ctx.body = '';
}

function queryParam(ctx, name) {
  const value = ctx.query[name];
  return Array.isArray(value) ? value[0] : value;
}

// Test-only routes, ahead of oidc-provider's own (Provider#use inserts before them).
provider.use(async (ctx, next) => {
  const interaction = /^\/interaction\/([^/]+)$/.exec(ctx.path);
  if (interaction && ctx.method === 'GET') {
    ctx.set('Cache-Control', 'no-store');
    try {
      await completeInteraction(ctx, interaction[1]);
    } catch (err) {
      log(`interaction ${interaction[1]}: ${err.name}: ${err.error_description || err.message}`);
      ctx.status = err.statusCode || err.status || 500;
      ctx.body = { error: err.error || 'server_error', error_description: err.error_description || err.message };
    }
    return;
  }

  if (ctx.path === '/test/next-login' && ctx.method === 'POST') {
    const account = queryParam(ctx, 'account');
    if (!ACCOUNTS[account]) {
      ctx.status = 400;
      ctx.body = { error: `unknown account ${JSON.stringify(account)}`, accounts: Object.keys(ACCOUNTS) };
      return;
    }
    nextLogin = account;
    log(`next login: ${account}`);
    ctx.body = { next_login: account };
    return;
  }

  if (ctx.path === '/test/id-token-ttl' && ctx.method === 'POST') {
    const seconds = Number(queryParam(ctx, 'seconds'));
    if (!Number.isSafeInteger(seconds) || seconds < 1) {
      ctx.status = 400;
      ctx.body = { error: 'seconds must be a positive integer' };
      return;
    }
    idTokenTtl = seconds;
    log(`id token ttl: ${seconds}s`);
    ctx.body = { id_token_ttl: seconds };
    return;
  }

  await next();
});

server.on('request', provider.callback());

const portFile = args['port-file'];
const tmp = `${portFile}.tmp.${process.pid}`;
writeFileSync(tmp, issuer);
renameSync(tmp, portFile);
log(`listening, issuer ${issuer}`);

