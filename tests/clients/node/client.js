#!/usr/bin/env node
// Drives kafkajs against a Kafka cluster, for Samsa's client matrix. Each subcommand prints
// JSON on stdout: one object, or for the group member one object a line as things happen.
// Kafka errors are reported by their names, so that the test, not this program, judges them;
// the exit status is non-zero only for a usage mistake or a failure it cannot describe.
//
//   node client.js create|describe|produce|offsets|consume|features --bootstrap H:P --topic T ...
'use strict'

const readline = require('readline')
const { Kafka, Partitioners, logLevel, ConfigResourceTypes, AclResourceTypes, AclOperationTypes,
  AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')

// DescribeConfigs' config sources, by the names Kafka gives them.
const CONFIG_SOURCES = ['UNKNOWN', 'DYNAMIC_TOPIC_CONFIG', 'DYNAMIC_BROKER_CONFIG',
  'DYNAMIC_DEFAULT_BROKER_CONFIG', 'STATIC_BROKER_CONFIG', 'DEFAULT_CONFIG',
  'DYNAMIC_BROKER_LOGGER_CONFIG']

// Every call is bounded: a client that hangs is a failure the test sees.
const STEP_MS = 20000

function emit (value) {
  process.stdout.write(JSON.stringify(value) + '\n')
}

function fatal (message) {
  process.stderr.write(`kafkajs-client: ${message}\n`)
  process.exit(2)
}

// kafkajs logs through console by default (stdout); its log goes to stderr here. The broker
// errors it logs are kept too: kafkajs names some Kafka errors only in its log.
const loggedErrors = []
const toStderr = () => ({ namespace, label, log }) => {
  if (label === 'ERROR' && log.error) loggedErrors.push(log.error)
  process.stderr.write(`${label} ${namespace} ${log.message} ${JSON.stringify(log)}\n`)
}

function options (argv) {
  const opts = {}
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    if (!flag.startsWith('--')) fatal(`unexpected argument ${flag}`)
    const next = argv[i + 1]
    if (next === undefined || next.startsWith('--')) {
      opts[flag.slice(2)] = true
    } else {
      opts[flag.slice(2)] = next
      i++
    }
  }
  if (!opts.bootstrap || !opts.topic) fatal('--bootstrap and --topic are required')
  return opts
}

function kafka (opts) {
  return new Kafka({
    clientId: 'samsa-kafkajs',
    brokers: opts.bootstrap.split(','),
    logLevel: logLevel.WARN,
    logCreator: toStderr,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 }
  })
}

// A Kafka error's name (TOPIC_ALREADY_EXISTS) wherever kafkajs wrapped it; otherwise the
// innermost kafkajs error's class name; "TIMEOUT" for a step that ran out of time.
function errorName (error) {
  let innermost = error
  for (let e = error; e; e = e.cause || e.originalError) {
    if (e.type && e.type !== 'UNKNOWN') return e.type
    if (e.name === 'Timeout') return 'TIMEOUT'
    innermost = e
  }
  return innermost.name || String(innermost)
}

function bounded (promise) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('step timed out'), { name: 'Timeout' })), STEP_MS)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

async function attempt (fn) {
  const began = Date.now()
  const logged = loggedErrors.length
  try {
    const value = await bounded(fn())
    return { error: null, value, elapsed_ms: Date.now() - began }
  } catch (e) {
    return {
      error: errorName(e),
      message: e.message,
      logged: [...new Set(loggedErrors.slice(logged))],
      elapsed_ms: Date.now() - began
    }
  }
}

async function withAdmin (opts, fn) {
  const admin = kafka(opts).admin()
  await bounded(admin.connect())
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

// create: CreateTopics with a replication factor and topic configs. kafkajs answers false,
// not an error, for a topic that exists already.
async function create (opts) {
  const configEntries = (opts.config || '').split(',').filter(Boolean).map(kv => {
    const [name, value] = kv.split('=')
    return { name, value }
  })
  const result = await withAdmin(opts, admin => attempt(() => admin.createTopics({
    topics: [{
      topic: opts.topic,
      numPartitions: Number(opts.partitions || 3),
      replicationFactor: Number(opts.rf || 3),
      configEntries
    }],
    waitForLeaders: true
  })))
  emit({ error: result.error, created: result.value })
}

// describe: partitions (leader, replicas, ISR), configs with their sources, the cluster.
async function describe (opts) {
  await withAdmin(opts, async admin => {
    const metadata = await attempt(() => admin.fetchTopicMetadata({ topics: [opts.topic] }))
    const configs = await attempt(() => admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: opts.topic }],
      includeSynonyms: false
    }))
    const cluster = await attempt(() => admin.describeCluster())
    const partitions = metadata.value
      ? metadata.value.topics[0].partitions
        .map(p => ({
          partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr,
          error: p.partitionErrorCode === 0 ? null : p.partitionErrorCode
        }))
        .sort((a, b) => a.partition - b.partition)
      : []
    const entries = {}
    for (const resource of (configs.value ? configs.value.resources : [])) {
      for (const c of resource.configEntries) {
        entries[c.configName] = { value: c.configValue, source: CONFIG_SOURCES[c.configSource] }
      }
    }
    emit({
      error: metadata.error,
      partitions,
      configs_error: configs.error,
      configs: entries,
      cluster_error: cluster.error,
      brokers: cluster.value ? cluster.value.brokers.map(b => b.nodeId).sort((a, b) => a - b) : [],
      controller: cluster.value ? cluster.value.controller : null
    })
  })
}

// produce: count keyed records with acks=-1 from an idempotent producer, in sends of 100.
async function produce (opts) {
  const count = Number(opts.count || 100)
  const prefix = opts.prefix || 'r'
  const producer = kafka(opts).producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    // An idempotent producer retries without limit; every send is bounded by STEP_MS.
    retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 1000 }
  })
  await bounded(producer.connect())
  let acked = 0
  const errors = {}
  const partitions = {}
  for (let start = 0; start < count; start += 100) {
    const messages = []
    for (let i = start; i < Math.min(count, start + 100); i++) {
      messages.push({ key: String(i), value: `${prefix}-${i}` })
    }
    const sent = await attempt(() => producer.send({ topic: opts.topic, acks: -1, messages }))
    if (sent.error) {
      errors[sent.error] = (errors[sent.error] || 0) + messages.length
      continue
    }
    acked += messages.length
    for (const r of sent.value) {
      if (r.errorCode !== 0) errors[`code ${r.errorCode}`] = (errors[`code ${r.errorCode}`] || 0) + 1
      partitions[r.partition] = partitions[r.partition] || []
      partitions[r.partition].push(Number(r.baseOffset))
    }
  }
  await producer.disconnect()
  emit({ acked, errors, base_offsets: partitions })
}

// offsets: the topic's offsets; with --commit, the group's offsets set to the end offsets
// (setOffsets, an OffsetCommit as an admin does); then the group's committed offsets and
// its description.
async function offsets (opts) {
  await withAdmin(opts, async admin => {
    const listed = await attempt(() => admin.fetchTopicOffsets(opts.topic))
    const start = {}
    const end = {}
    for (const p of listed.value || []) {
      start[p.partition] = Number(p.low)
      end[p.partition] = Number(p.high)
    }
    const result = { offsets_error: listed.error, start, end }
    if (opts.commit) {
      const set = await attempt(() => admin.setOffsets({
        groupId: opts.group,
        topic: opts.topic,
        partitions: Object.entries(end).map(([partition, offset]) => ({ partition: Number(partition), offset: String(offset) }))
      }))
      result.commit_error = set.error
    }
    const fetched = await attempt(() => admin.fetchOffsets({ groupId: opts.group, topics: [opts.topic] }))
    result.fetch_error = fetched.error
    result.committed = {}
    for (const t of fetched.value || []) {
      for (const p of t.partitions) result.committed[p.partition] = Number(p.offset)
    }
    const described = await attempt(() => admin.describeGroups([opts.group]))
    result.group_error = described.error
    const group = described.value ? described.value.groups[0] : {}
    result.group_state = group.state
    result.group_members = (group.members || []).length
    emit(result)
  })
}

// consume: a group member. It prints {"event": "owned"} whenever its partitions change and
// {"event": "records"} for each batch (committed before the next one is fetched), until
// stdin says "leave" (or closes); then it leaves the group and prints {"event": "left"}.
async function consume (opts) {
  const consumer = kafka(opts).consumer({
    groupId: opts.group,
    heartbeatInterval: 500,
    sessionTimeout: 10000,
    rebalanceTimeout: 20000,
    // kafkajs heartbeats, rejoins and stops only between fetches, so each rebalance and the
    // leave wait out a fetch's long poll (5 s by default, with Apache Kafka as with Samsa).
    maxWaitTimeInMs: 500
  })
  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
  consumer.on(GROUP_JOIN, e => {
    const owned = (e.payload.memberAssignment[opts.topic] || []).slice().sort((a, b) => a - b)
    emit({ event: 'owned', partitions: owned })
  })
  consumer.on(REBALANCING, () => emit({ event: 'owned', partitions: [] }))
  consumer.on(CRASH, e => emit({ event: 'error', where: 'crash', error: errorName(e.payload.error) }))
  await bounded(consumer.connect())
  await bounded(consumer.subscribe({ topics: [opts.topic], fromBeginning: true }))
  await consumer.run({
    autoCommitThreshold: 1,
    eachBatch: async ({ batch }) => {
      const records = batch.messages.map(m => [batch.partition, Number(m.offset), m.value.toString()])
      if (records.length) emit({ event: 'records', records })
    }
  })
  const lines = readline.createInterface({ input: process.stdin })
  await new Promise(resolve => {
    lines.on('line', line => { if (line.trim() === 'leave') resolve() })
    lines.on('close', resolve)
  })
  const left = await attempt(() => consumer.disconnect())
  emit({ event: 'left', error: left.error })
  process.exit(0)
}

// features: what kafkajs offers beyond produce and consume, each tried once and timed: a
// transaction, describeAcls (answered as Kafka without an authorizer answers) and DeleteRecords
// (it trims the topic's first record). Afterwards the same cluster connection still works.
async function features (opts) {
  const result = {}
  const client = kafka(opts)
  const txnProducer = client.producer({
    transactionalId: `samsa-txn-${opts.topic}`,
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner
  })
  result.transaction = await attempt(async () => {
    await txnProducer.connect()
    const txn = await txnProducer.transaction()
    await txn.send({ topic: opts.topic, messages: [{ value: 'in a transaction' }] })
    await txn.commit()
  })
  await txnProducer.disconnect()
  await withAdmin(opts, async admin => {
    result.describe_acls = await attempt(() => admin.describeAcls({
      resourceType: AclResourceTypes.ANY,
      resourcePatternType: ResourcePatternTypes.ANY,
      operation: AclOperationTypes.ANY,
      permissionType: AclPermissionTypes.ANY
    }))
    result.delete_records = await attempt(() => admin.deleteTopicRecords({
      topic: opts.topic, partitions: [{ partition: 0, offset: '1' }]
    }))
    result.after = await attempt(() => admin.describeCluster())
  })
  for (const v of Object.values(result)) delete v.value
  emit(result)
}

const commands = { create, describe, produce, offsets, consume, features }
const [command, ...rest] = process.argv.slice(2)
if (!commands[command]) fatal(`usage: client.js ${Object.keys(commands).join('|')} --bootstrap H:P --topic T ...`)
commands[command](options(rest)).catch(e => fatal(`${errorName(e)}: ${e.message}`))
