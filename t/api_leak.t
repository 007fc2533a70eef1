#!/usr/bin/perl

# R-CONF-6: credentials never appear in any admin API output, metric, the
# status page or a log line.  Traffic makes state for every endpoint (an
# open breaker, cooldowns, a terminal state, a lockout, a restatement),
# then every output and both logs are searched for the configured keys
# and the API token.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'LEAKCHECK-admin-token-5f2c9a';

my %keys = (
    a1 => 'sk-LEAKCHECK-a1-7d41~status=503',
    g1 => 'sk-LEAKCHECK-g1-0b9e~status=402',
    g2 => 'sk-LEAKCHECK-g2-c3aa~status=429,retry=30',
    d1 => 'sk-LEAKCHECK-d1-91f0~status=429',
    r1 => 'sk-LEAKCHECK-r1-22e8~status=403,body=%E9%A2%9D%E5%BA%A6%E4%B8%8D'
          . '%E8%B6%B3',
    b1 => 'sk-LEAKCHECK-b1-5e6d',
);

$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;
$ENV{OMNI_TEST_KEY_B1} = $keys{b1};

for my $c (qw(a1 g1 g2 d1 r1)) {
    $t->write_file("key-$c", "$keys{$c}\n");
}

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider alpha url=http://127.0.0.1:%%PORT_mock_p%%/alpha
                       kind=local;
    omniroute_provider gamma url=http://127.0.0.1:%%PORT_mock_p%%/gamma
                       auth=x-api-key;
    omniroute_provider delta url=http://127.0.0.1:%%PORT_mock_p%%/delta
                       lockout=on auth=header:api-key;
    omniroute_provider ar url=http://127.0.0.1:%%PORT_mock_p%%/ar
                       catalog=agentrouter;
    omniroute_provider beta url=http://127.0.0.1:%%PORT_mock_p%%/beta;

    omniroute_connection a1 provider=alpha key_file=%%TESTDIR%%/key-a1;
    omniroute_connection g1 provider=gamma key_file=%%TESTDIR%%/key-g1;
    omniroute_connection g2 provider=gamma key_file=%%TESTDIR%%/key-g2;
    omniroute_connection d1 provider=delta key_file=%%TESTDIR%%/key-d1;
    omniroute_connection r1 provider=ar key_file=%%TESTDIR%%/key-r1;
    omniroute_connection b1 provider=beta key_env=OMNI_TEST_KEY_B1;

    omniroute_combo all alpha/m1 gamma/m1 delta/gpt-5 ar/m1 beta/m2;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
            omniroute_max_attempts 10;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));

my $port = $t->port('gw');
my @outputs;

sub api {
    my ($method, $path, $body, %h) = @_;

    $h{Authorization} //= "Bearer $TOKEN";
    delete $h{Authorization} if $h{Authorization} eq 'none';

    if (defined $body) {
        $body = encode_json($body) if ref $body;
        $h{'Content-Type'} = 'application/json';
    }

    my $r = $t->http($port, OmniTest::request_text($method, $path, $body,
                                                   %h));
    push @outputs, ["$method $path", $r->{raw}];
    return $r;
}

# state for every endpoint
$t->post($port, '/v1/chat/completions', { model => 'all' });
sleep(1.2);
my $r = $t->post($port, '/v1/chat/completions', { model => 'all' });
is($r->{headers}{'x-omniroute-connection'}, 'b1', 'traffic reached b1');

api('PATCH', '/api/resilience', { providers => { alpha => {
    error_rules => [{ status => 500, match => 'boom' }],
    error_default => { cooldown_ms => 600000 } } } });

my $h = decode_json(api('GET', '/api/monitoring/health')->{body});
is($h->{providers}{alpha}{state}, 'OPEN', 'alpha OPEN');

my $c = decode_json(api('GET', '/api/resilience/cooldowns')->{body});
my %st = map { $_->{id} => $_->{terminal} // $_->{status} }
         @{$c->{connections}};
is($st{g1}, 'credits_exhausted', 'g1 terminal');
is($st{g2}, 'cooldown', 'g2 cooling down');
is($st{r1}, 'cooldown', 'r1 cooling down (restated quota)');

my $l = decode_json(api('GET', '/api/resilience/model-cooldowns')->{body});
is($l->{count}, 1, 'd1 locked out');

# every endpoint, answers and errors
api('GET', '/api/resilience');
api('GET', '/api/resilience/cooldowns?provider=gamma');
api('GET', '/metrics');
api('GET', '/status');
api('GET', '/api/monitoring/health', undef, Authorization => 'none');
api('GET', '/api/monitoring/health', undef,
    Authorization => "Bearer $keys{b1}");
api('GET', '/nope');
api('PUT', '/api/resilience', '{}');
api('PATCH', '/api/resilience', '{"providers":');
api('PATCH', '/api/resilience', { providers => { b1 => {} } });
api('POST', '/api/resilience/cooldowns', { connectionIds => [$keys{b1}] });
api('POST', '/api/resilience/terminal-reset', { connectionId => 'g1' });
api('DELETE', '/api/resilience/model-cooldowns',
    { provider => 'delta', connection => 'd1', model => 'gpt-5' });
api('POST', '/api/resilience/cooldowns', { all => JSON::PP::true });
api('POST', '/api/resilience/reset', {});
api('GET', '/api/monitoring/health');

# the status page as a browser renders it, when chromium is there
SKIP: {
    my $chromium = `command -v chromium 2>/dev/null`;
    chomp $chromium;
    OmniTest::skip_without('chromium not installed', 1) unless $chromium;

    my $profile = $t->dir . '/chromium';
    my $dom = `timeout 120 $chromium --headless --no-sandbox --disable-gpu \\
        --disable-background-networking --disable-component-update \\
        --disable-sync --disable-dev-shm-usage --no-first-run \\
        --user-data-dir=$profile \\
        --virtual-time-budget=5000 --dump-dom \\
        'http://127.0.0.1:$port/status#token=$TOKEN' 2>/dev/null`;
    like($dom, qr/data-provider="alpha"/, 'the rendered status page');
    push @outputs, ['status page DOM', $dom];
}

$t->stop;

push @outputs, ['error.log', $t->error_log];
push @outputs, ['access.log', $t->read_file('logs/access.log')];

my @secrets = ((map { (split /~/, $_)[0] } values %keys), $TOKEN);

for my $o (@outputs) {
    my ($name, $text) = @$o;
    my @found = grep { index($text, $_) >= 0 } @secrets;

    # the client may quote a key back at us in a rejected request; the
    # answer must not echo it either
    ok(!@found, "$name: no credential") or diag("found: @found");
}

ok(scalar @outputs >= 20, 'every output was searched (' . @outputs . ')');

# nginx -t: a bad token file is rejected without printing the token
$t->write_file('bad-token', "two words-LEAKCHECK-bad-token\n");
my $conf = $t->read_file('nginx.conf');
$conf =~ s/omniroute_api_token env=OMNI_TEST_API_TOKEN;/omniroute_api_token file=%%TESTDIR%%\/bad-token;/;
$t->write_file('nginx.conf', $t->expand($conf));
my ($rc, $out) = $t->test_config;
isnt($rc, 0, 'nginx -t rejects a token with a space');
like($out, qr/must be printable ASCII without spaces/, 'saying why');
unlike($out, qr/LEAKCHECK/, 'without printing the token');

$t->done;

done_testing;
