// Drives keyfire's dashboard in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core; Playwright's own browser download is not used).
//
//   node tests/browser/dashboard.mjs <base url> <api token> <screenshot dir>
//
// tests/ops/browser.rs starts Redis and a node, creates the jobs this script expects, runs it,
// and checks what it reports. It expects a job `$KF_JOB` (default `xss.job`: every second,
// handler failing with an error text that holds `$KF_TEXT`, params holding it too, one attempt,
// so it has dead letters). By default that text is HTML, which must show as text everywhere;
// the screenshots for the docs run the same script over a realistic deployment instead.
//
// Fails (exit 1, with a JSON report on stdout) on any console error, page error, failed
// request, HTTP error answer, JavaScript dialog (alert/confirm/prompt), or HTML from the data
// turning into elements.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, token, shots] = process.argv.slice(2);
if (!base || token === undefined || !shots) {
  console.error('usage: node dashboard.mjs <base url> <api token> <screenshot dir>');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

const JOB = process.env.KF_JOB || 'xss.job';
const PAYLOAD = process.env.KF_TEXT || '<script>alert(1)</script>';
const SEARCH = JOB.split(/[.-]/)[0];
const TOPIC = process.env.KF_TOPIC || 'xss.topic';
const problems = [];
const steps = [];
const started = Date.now();

function step(name) {
  steps.push({ step: name, at_ms: Date.now() - started });
}

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in a container needs --no-sandbox; the rest keep Chromium off the (closed) network.
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});

let failed = null;
try {
  // launch() gives a fresh profile (its own temporary user-data-dir) to every context.
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  page.setDefaultTimeout(15000);
  page.on('dialog', async (d) => {
    problems.push(`a ${d.type()} dialog fired: ${d.message()}`);
    await d.dismiss().catch(() => {});
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });

  /** No markup from the data became elements: no <script>, no <img> but the logo, nothing pwned. */
  async function noInjectedMarkup(where) {
    const found = await page.evaluate(() => ({
      scripts: document.querySelectorAll('#app script, #banner script, dialog script').length,
      images: document.querySelectorAll('#app img, #banner img, dialog img').length,
      pwned: window.__pwned === true,
    }));
    check(found.scripts === 0 && found.images === 0 && !found.pwned,
      `no injected markup on ${where}: ${JSON.stringify(found)}`);
  }

  async function shot(name) {
    await page.screenshot({ path: join(shots, name + '.png'), fullPage: true });
  }

  // 1. The page asks for the token before calling the API (the node has api.token).
  await page.goto(base + '/');
  step('loaded');
  if (token) {
    await page.getByRole('heading', { name: 'API token needed' }).waitFor();
    await page.locator('#token-input').fill(token);
    await page.locator('#token-use').click();
  }

  // 2. Overview: the live node, the job count, and a firing rate once two samples exist.
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.locator('[data-card="nodes"] .value').filter({ hasText: /^[1-9]/ }).waitFor();
  await page.locator('[data-card="rate"] .value').filter({ hasText: /\d/ }).waitFor({ timeout: 20000 });
  const deadCount = await page.locator('[data-card="dead"] .value').textContent();
  check(Number(deadCount.replace(/,/g, '')) > 0, 'the overview counts dead letters: ' + deadCount);
  await noInjectedMarkup('overview');
  await shot('overview');
  step('overview');

  // 3. Jobs: the job is listed with its status.
  await page.locator('#nav a[data-page="jobs"]').click();
  const row = page.locator(`#jobs-table tr[data-job="${JOB}"]`);
  await row.waitFor();
  check((await row.locator('.badge').textContent()) === 'active', 'the job is listed as active');
  const ids = await page.locator('#jobs-table tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.job));
  await noInjectedMarkup('jobs');
  await shot('jobs');
  step('jobs listed: ' + ids.join(', '));

  // 4. Search by id prefix, and a search text that is markup shows as text.
  await page.locator('#job-search').fill(SEARCH);
  await page.locator('#job-search').press('Enter');
  await page.waitForFunction((q) => location.hash.includes('q=' + q), SEARCH);
  await page.waitForFunction((q) => {
    const rows = [...document.querySelectorAll('#jobs-table tbody tr')];
    return rows.length > 0 && rows.every((r) => r.dataset.job.startsWith(q));
  }, SEARCH);
  await page.locator('#job-search').fill(PAYLOAD);
  await page.locator('#job-search').press('Enter');
  await page.locator('.empty', { hasText: 'No job id starts with' }).waitFor();
  check((await page.locator('.empty').textContent()).includes(PAYLOAD), 'the search text shows as text');
  await noInjectedMarkup('search');
  await page.locator('#job-search').fill('');
  await page.locator('#job-search').press('Enter');
  await row.waitFor();
  step('search');

  // 5. Pause it from the page: a confirmation first, then the state changes.
  await row.getByRole('button', { name: 'Pause' }).click();
  const dialog = page.locator('dialog#confirm');
  await dialog.waitFor({ state: 'visible' });
  check((await dialog.locator('#confirm-text').textContent()).includes(JOB), 'the dialog names the job');
  await shot('confirm');
  await dialog.getByRole('button', { name: 'Pause' }).click();
  await page.locator(`#jobs-table tr[data-job="${JOB}"] .badge`, { hasText: 'paused' }).waitFor();
  await page.locator('#banner-text', { hasText: `Paused "${JOB}"` }).waitFor();
  step('paused');

  // 6. Its runs, with their errors as text.
  await page.locator(`#jobs-table tr[data-job="${JOB}"] a`).first().click();
  await page.locator('#job-id', { hasText: JOB }).waitFor();
  await page.locator('h1 .badge', { hasText: 'paused' }).waitFor();
  await page.locator('#runs-table tbody tr').first().waitFor();
  const errors = await page.locator('#runs-table td.error').allTextContents();
  check(errors.length > 0 && errors.every((e) => e.includes(PAYLOAD)), 'run errors show the markup as text');
  check((await page.locator('#job-spec').textContent()).includes(PAYLOAD), 'the spec shows the markup as text');
  await page.locator('#job-why[data-state="paused"]').waitFor();
  check((await page.locator('#job-why').textContent()).includes('paused (since'), 'why says since when the job is paused');
  await noInjectedMarkup('job');
  await shot('job');
  step(`runs: ${await page.locator('#runs-table tbody tr').count()}`);

  // 7. Dead letters: listed with their errors; replay one.
  await page.locator('#nav a[data-page="dead"]').click();
  const section = page.locator(`section[data-job="${JOB}"]`);
  await section.locator('tbody tr').first().waitFor();
  check((await section.locator('td.error').first().textContent()).includes(PAYLOAD), 'dead letter errors show as text');
  await noInjectedMarkup('dead');
  await shot('dead');
  await section.locator('tbody tr').first().getByRole('button', { name: 'Replay' }).click();
  await dialog.getByRole('button', { name: 'Replay' }).click();
  await page.locator('#banner-text', { hasText: 'Queued 1 dead letter' }).waitFor();
  step('replayed one dead letter');

  // 7b. Topics: a delay-queue task added through the API shows in its topic's counts.
  const added = await fetch(base + '/v1/topics/' + TOPIC + '/tasks', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: 'Bearer ' + token } : {}) },
    body: JSON.stringify({ payload: PAYLOAD }),
  });
  check(added.status === 201, 'a topic task is added: HTTP ' + added.status);
  await page.locator('#nav a[data-page="topics"]').click();
  const topicRow = page.locator(`tr[data-topic="${TOPIC}"]`);
  await topicRow.waitFor();
  check((await topicRow.locator('td[data-col="ready"]').textContent()) === '1', 'the topic counts its ready task');
  await noInjectedMarkup('topics');
  await shot('topics');
  step('topics');

  // 7b'. A topic's dead letter and its pause show on the topics page.
  const auth = token ? { authorization: 'Bearer ' + token } : {};
  const post = (path, body) => fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const dies = await post('/v1/topics/' + TOPIC + '/tasks', { id: 'dies-1', payload: PAYLOAD, ttr: '200ms', max_deliveries: 1 });
  check(dies.status === 201, 'a task delivered once is added: HTTP ' + dies.status);
  check((await post('/v1/topics/' + TOPIC + '/pop?max=10')).status === 200, 'the topic\'s tasks are popped');
  let deadNow = 0;
  for (let i = 0; i < 100 && deadNow === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    await post('/v1/topics/' + TOPIC + '/pop'); // takes back the lapsed reservation: a dead letter
    deadNow = (await (await fetch(base + '/v1/topics/' + TOPIC + '/dead', { headers: auth })).json()).dead.length;
  }
  check(deadNow === 1, 'the lapsed task is a dead letter');
  await page.locator('#nav a[data-page="limits"]').click();
  await page.locator('#nav a[data-page="topics"]').click();
  const deadRow = page.locator(`table.topic-dead-table tr[data-task="dies-1"]`);
  await deadRow.waitFor();
  check((await deadRow.textContent()).includes('expired unfinished'), 'the dead letter shows why it died');
  // Paused from the page: the row shows it, and the API says so.
  await page.locator(`tr[data-topic="${TOPIC}"] button[data-action="pause"]`).click();
  await dialog.waitFor({ state: 'visible' });
  check((await dialog.locator('#confirm-text').textContent()).includes(TOPIC), 'the dialog names the topic');
  await dialog.getByRole('button', { name: 'Pause' }).click();
  await page.locator(`tr[data-topic="${TOPIC}"] [data-col="paused"]`).waitFor();
  const topicNow = async () => (await (await fetch(base + '/v1/topics/' + TOPIC, { headers: auth })).json());
  check((await topicNow()).paused === true, 'the topic is paused through the page');
  await noInjectedMarkup('topic dead letters');
  await shot('topic-dead');
  // Its dead letters replayed from the page: none left.
  await page.locator(`h2[data-dead-topic="${TOPIC}"] button[data-action="replay"]`).click();
  await dialog.getByRole('button', { name: 'Replay all' }).click();
  await page.locator('#banner-text', { hasText: 'ready again' }).waitFor();
  const deadLeft = (await (await fetch(base + '/v1/topics/' + TOPIC + '/dead', { headers: auth })).json()).dead.length;
  check(deadLeft === 0, 'the dead letters are replayed through the page: ' + deadLeft + ' left');
  // Resumed from the page.
  await page.locator(`tr[data-topic="${TOPIC}"] button[data-action="resume"]`).click();
  await dialog.getByRole('button', { name: 'Resume' }).click();
  await page.locator(`tr[data-topic="${TOPIC}"] button[data-action="pause"]`).waitFor();
  check((await topicNow()).paused === false, 'the topic is resumed through the page');
  step('topic dead letters, pause, replay and resume');

  // 7c. Limits: a limit set through the API shows with its bounds.
  const limited = await fetch(base + '/v1/limits/host:browser.test', {
    method: 'PUT',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: 'Bearer ' + token } : {}) },
    body: JSON.stringify({ rate: 25, in_flight: 4 }),
  });
  check(limited.status === 200, 'a limit is set: HTTP ' + limited.status);
  await page.locator('#nav a[data-page="limits"]').click();
  const limitRow = page.locator('tr[data-limit="host:browser.test"]');
  await limitRow.waitFor();
  check((await limitRow.locator('td[data-col="rate"]').textContent()) === '25', 'the limit shows its rate');
  check((await limitRow.locator('td[data-col="held"]').textContent()) === '0', 'nothing held');
  await noInjectedMarkup('limits');
  await shot('limits');
  step('limits');

  // 8. Cancelling a confirmation does nothing.
  await page.locator('#nav a[data-page="jobs"]').click();
  await row.waitFor();
  await row.getByRole('button', { name: 'Delete' }).click();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await page.waitForTimeout(300);
  check(await row.isVisible(), 'a cancelled delete keeps the job');
  step('cancel keeps the job');
  await context.close();
} catch (e) {
  failed = e.message.split('\n')[0];
} finally {
  await browser.close();
}

const report = {
  ok: failed === null && problems.length === 0,
  failed,
  problems,
  steps,
  elapsed_ms: Date.now() - started,
};
console.log(JSON.stringify(report));
process.exit(report.ok ? 0 : 1);
