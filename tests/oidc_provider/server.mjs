// A real OpenID provider for the sign-in tests: the certified `oidc-provider` package (npm, pinned in the
// root package.json), on 127.0.0.1 only, with one confidential client, users and their groups from a JSON
// file the test writes (read at every sign-in, so a test can take a group away), and a plain login form
// of its own instead of the package's development interactions (those print debug details on the page).
//
// Environment: PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, USERS_FILE ({"name": {"password", "groups",
// "email"}}), TOKENS_FILE (every token response is appended here as a JSON line, so the test can check
// that no token ever shows up in gpudash's pages or logs). Prints "ready <issuer>" once listening.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const users = () => JSON.parse(readFileSync(process.env.USERS_FILE, 'utf8'));

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID,
    client_secret: process.env.CLIENT_SECRET,
    redirect_uris: [process.env.REDIRECT_URI],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  pkce: { required: () => true },
  claims: {
    openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email', 'email_verified'], groups: ['groups'],
  },
  scopes: ['openid', 'profile', 'email', 'groups'],
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  jwks: { keys: [jwk] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  async findAccount(ctx, id) {
    const user = users()[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: `sub-${id}`, preferred_username: id, name: id, email: user.email || `${id}@example.test`,
          email_verified: true, groups: user.groups || [],
        };
      },
    };
  },
});

// Record every token response (after the provider has answered).
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token' && ctx.body && ctx.body.access_token && process.env.TOKENS_FILE) {
    appendFileSync(process.env.TOKENS_FILE, `${JSON.stringify(ctx.body)}\n`);
  }
});

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(res, uid, error) {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(`<!doctype html><html lang="en"><head><title>Test identity provider</title></head><body>
<h1>Test identity provider</h1>${error ? `<p id="idp-error">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Username <input id="idp-username" name="username" autocomplete="off"></label>
<label>Password <input id="idp-password" name="password" type="password"></label>
<button id="idp-submit" type="submit">Sign in</button></form></body></html>`);
}

async function readForm(req) {
  let raw = '';
  for await (const chunk of req) raw += chunk;
  return new URLSearchParams(raw);
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error('interaction does not match its cookie');
  const { prompt, params, session } = details;
  if (prompt.name === 'login' && action === 'login' && req.method === 'POST') {
    const form = await readForm(req);
    const name = form.get('username') || '';
    const user = users()[name];
    if (!user || user.password !== form.get('password')) {
      loginPage(res, uid, 'Wrong username or password.');
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: name } }, { mergeWithLastSubmission: false });
  } else if (prompt.name === 'login') {
    loginPage(res, uid, '');
  } else if (prompt.name === 'consent') {
    // A first-party client: consent is given without asking.
    const grant = details.grantId ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  } else {
    res.writeHead(501).end(`prompt ${prompt.name} not implemented`);
  }
}

const handle = provider.callback();
const server = createServer((req, res) => {
  const match = /^\/interaction\/([\w-]+)(?:\/(login))?$/.exec(new URL(req.url, issuer).pathname);
  if (!match) {
    handle(req, res);
    return;
  }
  interaction(req, res, match[1], match[2]).catch((err) => {
    res.writeHead(400, { 'Content-Type': 'text/plain' }).end(`interaction failed: ${err.message}`);
  });
});
server.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
