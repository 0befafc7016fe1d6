// Command franz drives franz-go (kgo, and kadm for administration) against a Kafka cluster,
// for Samsa's client matrix. Each subcommand prints JSON on stdout: one object, or for the
// group member one object a line as things happen. Kafka errors are reported in the JSON by
// their names, so that the test, not this program, judges them; the exit status is non-zero
// only for a usage mistake or a failure this program cannot describe.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// step bounds every call this program makes: a client that hangs is a failure the test sees.
const step = 20 * time.Second

var (
	out   = json.NewEncoder(os.Stdout)
	outMu sync.Mutex
)

func emit(v any) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(v); err != nil {
		fatal("stdout: %v", err)
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franz: "+format+"\n", args...)
	os.Exit(2)
}

// errName is a Kafka error's name (TOPIC_ALREADY_EXISTS), "TIMEOUT" for a step that ran out
// of time, the client's own message otherwise, and nil for no error.
func errName(err error) any {
	var ke *kerr.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke):
		return ke.Message
	case errors.Is(err, context.DeadlineExceeded):
		return "TIMEOUT"
	default:
		return err.Error()
	}
}

type common struct {
	fs        *flag.FlagSet
	bootstrap *string
	topic     *string
}

func flags(name string) common {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	return common{
		fs:        fs,
		bootstrap: fs.String("bootstrap", "", "bootstrap servers, comma separated"),
		topic:     fs.String("topic", "", "topic"),
	}
}

func (c common) parse(args []string) {
	if err := c.fs.Parse(args); err != nil || *c.bootstrap == "" || *c.topic == "" {
		fatal("%s needs -bootstrap and -topic", c.fs.Name())
	}
}

func (c common) client(opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(*c.bootstrap, ",")...)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		fatal("client: %v", err)
	}
	return cl
}

func bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), step)
}

// admin runs fn with a kadm client and a bounded context, and prints what it returns.
func (c common) admin(fn func(ctx context.Context, adm *kadm.Client) map[string]any) {
	cl := c.client()
	defer cl.Close()
	ctx, cancel := bounded()
	defer cancel()
	emit(fn(ctx, kadm.NewClient(cl)))
}

// create: CreateTopics through kadm, with a replication factor and topic configs.
func create(args []string) {
	c := flags("create")
	partitions := c.fs.Int("partitions", 3, "partitions")
	rf := c.fs.Int("rf", 3, "replication factor")
	config := c.fs.String("config", "", "topic configs, k=v,k=v")
	c.parse(args)
	configs := map[string]*string{}
	for _, kv := range strings.Split(*config, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			configs[k] = kadm.StringPtr(v)
		}
	}
	c.admin(func(ctx context.Context, adm *kadm.Client) map[string]any {
		resp, err := adm.CreateTopics(ctx, int32(*partitions), int16(*rf), configs, *c.topic)
		if err == nil {
			err = resp[*c.topic].Err
		}
		return map[string]any{"error": errName(err), "id": resp[*c.topic].ID.String()}
	})
}

// describe: the topic's partitions (leader, replicas, ISR), its configs with their sources,
// and the brokers, through kadm.
func describe(args []string) {
	c := flags("describe")
	c.parse(args)
	c.admin(func(ctx context.Context, adm *kadm.Client) map[string]any {
		result := map[string]any{}
		topics, err := adm.ListTopics(ctx, *c.topic)
		result["error"] = errName(err)
		detail := topics[*c.topic]
		result["topic_error"] = errName(detail.Err)
		var partitions []map[string]any
		for _, p := range detail.Partitions.Sorted() {
			partitions = append(partitions, map[string]any{
				"partition": p.Partition, "leader": p.Leader, "replicas": p.Replicas,
				"isr": p.ISR, "error": errName(p.Err),
			})
		}
		result["partitions"] = partitions
		configs := map[string]any{}
		described, err := adm.DescribeTopicConfigs(ctx, *c.topic)
		result["configs_error"] = errName(err)
		for _, rc := range described {
			for _, cfg := range rc.Configs {
				configs[cfg.Key] = map[string]any{"value": cfg.MaybeValue(), "source": cfg.Source.String()}
			}
		}
		result["configs"] = configs
		brokers, err := adm.ListBrokers(ctx)
		result["brokers_error"] = errName(err)
		result["brokers"] = brokers.NodeIDs()
		return result
	})
}

// produce: count keyed records, idempotent with acks=all (franz-go's defaults, left as they
// are), waiting for every acknowledgement.
func produce(args []string) {
	c := flags("produce")
	count := c.fs.Int("count", 100, "records")
	prefix := c.fs.String("prefix", "r", "value prefix; values are prefix-i")
	c.parse(args)
	cl := c.client(kgo.DefaultProduceTopic(*c.topic))
	defer cl.Close()
	ctx, cancel := bounded()
	defer cancel()
	var mu sync.Mutex
	acked := 0
	errs := map[string]int{}
	partitions := map[int32][]int64{}
	for i := range *count {
		key := strconv.Itoa(i)
		r := &kgo.Record{Key: []byte(key), Value: []byte(*prefix + "-" + key)}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[fmt.Sprint(errName(err))]++
				return
			}
			acked++
			partitions[r.Partition] = append(partitions[r.Partition], r.Offset)
		})
	}
	flushErr := cl.Flush(ctx)
	id, epoch, idErr := cl.ProducerID(ctx)
	summary := map[string]any{}
	for p, offsets := range partitions {
		slices.Sort(offsets)
		summary[strconv.Itoa(int(p))] = map[string]any{
			"count": len(offsets), "first": offsets[0], "last": offsets[len(offsets)-1],
		}
	}
	emit(map[string]any{
		"acked": acked, "errors": errs, "flush_error": errName(flushErr),
		"partitions": summary, "producer_id": id, "producer_epoch": epoch,
		"producer_id_error": errName(idErr),
	})
}

// offsetsOf is the listed offsets of the topic by partition, and the first error.
func offsetsOf(listed kadm.ListedOffsets, err error, topic string) (map[string]int64, any) {
	m := map[string]int64{}
	for _, o := range listed[topic] {
		if o.Err != nil && err == nil {
			err = o.Err
		}
		m[strconv.Itoa(int(o.Partition))] = o.Offset
	}
	return m, errName(err)
}

// offsets: the topic's start and end offsets; with -commit, the group's offsets are set to
// the end offsets (OffsetCommit as an admin does); then the group's committed offsets and
// its description.
func offsets(args []string) {
	c := flags("offsets")
	group := c.fs.String("group", "", "group")
	commit := c.fs.Bool("commit", false, "commit the end offsets for the group first")
	c.parse(args)
	c.admin(func(ctx context.Context, adm *kadm.Client) map[string]any {
		result := map[string]any{}
		start, err := adm.ListStartOffsets(ctx, *c.topic)
		result["start"], result["start_error"] = offsetsOf(start, err, *c.topic)
		end, err := adm.ListEndOffsets(ctx, *c.topic)
		result["end"], result["end_error"] = offsetsOf(end, err, *c.topic)
		if *commit {
			committed, err := adm.CommitOffsets(ctx, *group, end.Offsets())
			if err == nil {
				err = committed.Error()
			}
			result["commit_error"] = errName(err)
		}
		fetched, err := adm.FetchOffsets(ctx, *group)
		if err == nil {
			err = fetched.Error()
		}
		result["fetch_error"] = errName(err)
		committed := map[string]int64{}
		fetched.Each(func(o kadm.OffsetResponse) {
			if o.Topic == *c.topic {
				committed[strconv.Itoa(int(o.Partition))] = o.At
			}
		})
		result["committed"] = committed
		groups, err := adm.DescribeGroups(ctx, *group)
		if err == nil {
			err = groups.Error()
		}
		result["group_error"] = errName(err)
		result["group_state"] = groups[*group].State
		result["group_members"] = len(groups[*group].Members)
		return result
	})
}

// member is one consumer in a group, following franz-go's advice for no duplicates: offsets
// are committed after each poll, before the group may rebalance, and on every revocation.
type member struct {
	mu    sync.Mutex
	owned map[int32]bool
}

func (m *member) change(assigned map[string][]int32, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ps := range assigned {
		for _, p := range ps {
			if add {
				m.owned[p] = true
			} else {
				delete(m.owned, p)
			}
		}
	}
	owned := []int32{}
	for p := range m.owned {
		owned = append(owned, p)
	}
	slices.Sort(owned)
	emit(map[string]any{"event": "owned", "partitions": owned})
}

// consume: a group member. It prints {"event": "owned"} whenever its partitions change and
// {"event": "records"} for each poll, until stdin says "leave" (or closes); then it leaves
// the group and prints {"event": "left"}.
func consume(args []string) {
	c := flags("consume")
	group := c.fs.String("group", "", "group")
	serverSide := c.fs.Bool("server-side-balancer", false, "ask for KIP-848 groups")
	c.parse(args)
	m := &member{owned: map[int32]bool{}}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.change(a, true)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				emit(map[string]any{"event": "error", "where": "revoke", "error": errName(err)})
			}
			m.change(r, false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			emit(map[string]any{"event": "lost"})
			m.change(l, false)
		}),
	}
	if *serverSide {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cl := c.client(opts...)
	leave := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() && strings.TrimSpace(lines.Text()) != "leave" {
		}
		close(leave)
	}()
	for {
		select {
		case <-leave:
			ctx, cancel := bounded()
			err := cl.CommitUncommittedOffsets(ctx)
			cancel()
			cl.Close() // leaves the group
			emit(map[string]any{"event": "left", "error": errName(err)})
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				emit(map[string]any{"event": "error", "where": "fetch", "partition": p, "error": errName(err)})
			}
		})
		var records [][]any
		fetches.EachRecord(func(r *kgo.Record) {
			records = append(records, []any{r.Partition, r.Offset, string(r.Value)})
		})
		if len(records) > 0 {
			emit(map[string]any{"event": "records", "records": records})
			ctx, cancel := bounded()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				emit(map[string]any{"event": "error", "where": "commit", "error": errName(err)})
			}
			cancel()
		}
		cl.AllowRebalance()
	}
}

type attempt struct {
	Error     any   `json:"error"`
	ElapsedMs int64 `json:"elapsed_ms"`
}

func try(fn func(ctx context.Context) error) attempt {
	ctx, cancel := bounded()
	defer cancel()
	began := time.Now()
	err := fn(ctx)
	return attempt{Error: errName(err), ElapsedMs: time.Since(began).Milliseconds()}
}

// features: what franz-go offers beyond produce and consume, each tried once and timed: a
// transaction and DescribeLogDirs (both served), and the KIP-848 group protocol asked for
// directly (not advertised by Samsa, so refused by the client at once, naming the cause).
// Afterwards the same client still works.
func features(args []string) {
	c := flags("features")
	c.parse(args)
	result := map[string]any{}

	txn := c.client(kgo.TransactionalID("samsa-txn-"+*c.topic), kgo.DefaultProduceTopic(*c.topic))
	result["transaction"] = try(func(ctx context.Context) error {
		if err := txn.BeginTransaction(); err != nil {
			return err
		}
		return txn.ProduceSync(ctx, kgo.StringRecord("in a transaction")).FirstErr()
	})
	txn.Close()

	cl := c.client()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	result["describe_log_dirs"] = try(func(ctx context.Context) error {
		_, err := adm.DescribeAllLogDirs(ctx, nil)
		return err
	})
	result["consumer_group_heartbeat"] = try(func(ctx context.Context) error {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group = "samsa-kip848-" + *c.topic
		req.MemberID = "m"
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{*c.topic}
		_, err := cl.Request(ctx, req)
		return err
	})
	result["after"] = try(func(ctx context.Context) error {
		_, err := adm.ListBrokers(ctx)
		return err
	})
	emit(result)
}

func main() {
	commands := map[string]func([]string){
		"create": create, "describe": describe, "produce": produce, "offsets": offsets,
		"consume": consume, "features": features,
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fatal("usage: franz create|describe|produce|offsets|consume|features -bootstrap HOST:PORT -topic T ...")
	}
	commands[os.Args[1]](os.Args[2:])
}
