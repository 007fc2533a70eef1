#!/usr/bin/perl

# The stream usage opt-in through the openai npm SDK (t/sdk/usage.cjs,
# installed by `make sdk-deps` into build/npm): with stream_usage=on, a
# stream that did not ask has no usage chunk for the SDK (no chunk
# without choices, no usage) and ends normally; one that asked gets the
# usage; both count the tokens.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep);
use OmniTest;

my $npm = $ENV{OMNI_NPM_DIR} || "$OmniTest::ROOT/build/npm";

OmniTest::need(system('node --version >/dev/null 2>&1') == 0,
               'node is not installed (make test-deps)');

OmniTest::need(-d "$npm/node_modules/openai",
               "the openai SDK is not installed in $npm (make sdk-deps)");

my $t = OmniTest->new;
my $m = $t->mock('p');

my $TOKEN = 'usage-sdk-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

$t->write_file('key-on', "sk-on~fixture=openai-chat,split=1\n");

$t->config(<<'EOF2');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider pon url=http://127.0.0.1:%%PORT_mock_p%%/on
                       stream_usage=on;
    omniroute_connection con provider=pon key_file=%%TESTDIR%%/key-on;
    omniroute_model mon pon/up-on;

    server {
        listen 127.0.0.1:%%PORT_gw%%;

        location /v1/ {
            omniroute_pass;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location = /metrics {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF2

$t->run($t->port('gw'));
my $base = 'http://127.0.0.1:' . $t->port('gw') . '/v1';

sub sdk {
    my ($ask) = @_;
    local $ENV{OMNI_NPM_DIR} = $npm;
    my $out = `node $FindBin::Bin/sdk/usage.cjs $base mon $ask 2>&1`;
    my $r = eval { decode_json((split /\n/, $out)[-1]) };
    diag("sdk output: $out") if !$r || $ENV{OMNI_SDK_DEBUG};
    return $r || { ok => 0, error => { message => $out } };
}

my $r = sdk('no');
ok($r->{ok}, 'not asked: the SDK\'s stream ended normally')
    or diag(explain $r);
is($r->{text}, 'Hello there', 'not asked: the text');
is($r->{empty}, 0, 'not asked: no chunk without choices');
ok(!defined $r->{usage}, 'not asked: no usage for the SDK');
is($r->{chunks}, 6, 'not asked: the six chunks with choices');

my $sent = $m->requests->[-1]{body};
like($sent, qr/"stream_options":\{"include_usage":true\}/,
     'not asked: the provider was asked');

$r = sdk('ask');
ok($r->{ok}, 'asked: ended normally') or diag(explain $r);
is($r->{empty}, 1, 'asked: the usage chunk');
is($r->{usage} && $r->{usage}{prompt_tokens}, 2095, 'asked: its usage');

# the second stream is counted in its log phase, after its last byte
my $text = $t->get_until($t->port('gw'), '/metrics', sub {
    $_[0] =~ /^omniroute_tokens_total\{provider="pon",[^}]*type="prompt"\} 4190$/m
}, Authorization => "Bearer $TOKEN")->{body};
like($text, qr/^omniroute_tokens_total\{provider="pon",connection="con",model="mon",type="prompt"\} 4190$/m,
     'both counted');

$t->done;
done_testing;
