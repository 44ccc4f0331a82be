# The RabbitMQ sink's tests' AMQP client (tests/src/rabbitmq.rs): pika, RabbitMQ's
# recommended Python client, against the broker scripts/test starts.
# stdin {"op": ..., "url": amqp URL, ...}; stdout one JSON object; exit 3 when the
# queue is missing (consume), with the broker's reason on stderr.
#   consume  {queue, want, timeout}: the queue must exist (passive declare); reads with
#            manual acks until `want` messages or `timeout` seconds, acks them (the rest
#            stay queued) -> {"messages": [...]}
#   declare  {queue, exchange, binding_key}: a durable topic exchange, a durable queue
#            bound to it -> {}
#   publish  {exchange, routing_key, body: [bytes], content_type, message_id, headers}:
#            persistent, mandatory, with publisher confirms -> {}
#   count    {queue}: -> {"messages": n, "consumers": n} or {"missing": true}
import base64, datetime, decimal, json, sys, time
import pika
from pika.exceptions import ChannelClosedByBroker, UnroutableError

inp = json.load(sys.stdin)
params = pika.URLParameters(inp["url"])
params.socket_timeout = 10
params.blocked_connection_timeout = 30
conn = pika.BlockingConnection(params)
ch = conn.channel()


def plain(v):
    """A header value (AMQP field-table types) as JSON."""
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, datetime.datetime):
        return int(v.timestamp())
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def body_json(b):
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def received(method, props, body):
    ts = props.timestamp
    return {
        "routing_key": method.routing_key,
        "exchange": method.exchange,
        "redelivered": bool(method.redelivered),
        "body": body_json(body),
        "body_bytes": list(body),
        "delivery_mode": None if props.delivery_mode is None else int(props.delivery_mode),
        "message_id": props.message_id,
        "content_type": props.content_type,
        "content_encoding": props.content_encoding,
        "message_type": props.type,
        "correlation_id": props.correlation_id,
        "app_id": props.app_id,
        "timestamp": None if ts is None else int(ts.timestamp() if isinstance(ts, datetime.datetime) else ts),
        "headers": None if props.headers is None else plain(props.headers),
    }


op = inp["op"]
out = {}
try:
    if op == "consume":
        queue, want = inp["queue"], inp["want"]
        ch.queue_declare(queue, passive=True)
        # No more unacked deliveries than wanted: what is not taken stays queued.
        # At most `want` unacked deliveries, acked once the consumer is cancelled: no
        # message beyond them is delivered (and requeued, marked redelivered).
        ch.basic_qos(prefetch_count=max(1, min(want, 1000)))
        deadline = time.monotonic() + inp["timeout"]
        got, tags = [], []
        if want > 0:
            for method, props, body in ch.consume(queue, auto_ack=False, inactivity_timeout=0.1):
                if method is not None:
                    got.append(received(method, props, body))
                    tags.append(method.delivery_tag)
                if len(got) >= want or time.monotonic() >= deadline:
                    break
            ch.cancel()
            for tag in tags:
                ch.basic_ack(tag)
        out = {"messages": got}
    elif op == "declare":
        ch.exchange_declare(inp["exchange"], exchange_type="topic", durable=True)
        ch.queue_declare(inp["queue"], durable=True)
        ch.queue_bind(inp["queue"], inp["exchange"], routing_key=inp["binding_key"])
    elif op == "publish":
        ch.confirm_delivery()
        props = pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent,
            content_type=inp.get("content_type"),
            message_id=inp.get("message_id"),
            headers=inp.get("headers"),
        )
        ch.basic_publish(inp["exchange"], inp["routing_key"], bytes(inp["body"]), properties=props, mandatory=True)
    elif op == "count":
        try:
            q = ch.queue_declare(inp["queue"], passive=True)
            out = {"messages": q.method.message_count, "consumers": q.method.consumer_count}
        except ChannelClosedByBroker as e:
            if e.reply_code != 404:
                raise
            out = {"missing": True}
    else:
        sys.exit(f"unknown op {op!r}")
except ChannelClosedByBroker as e:
    print(f"{op}: the broker closed the channel: {e.reply_code} {e.reply_text}", file=sys.stderr)
    sys.exit(3 if e.reply_code == 404 else 1)
except UnroutableError:
    print(f"{op}: the message was returned unroutable (no queue bound for {inp['routing_key']!r})", file=sys.stderr)
    sys.exit(1)
if conn.is_open:
    conn.close()
print(json.dumps(out))
