#!/usr/bin/perl

# R-CONC-3: a combo whose every target is in a short transient cooldown
# waits for the earliest end and is dispatched again, after its attempts
# failed with a 429 and before any attempt; when waiting is not allowed
# (wait=off, longer than combo_wait.max_wait_ms) the client gets 429
# all_targets_rate_limited with retry_after and reset_at; quota and auth
# states are never waited for.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use Time::HiRes qw(sleep time);
use JSON::PP ();
use OmniTest;

my $TOKEN = 'adm-0123456789-abcdefghij';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

my $t = OmniTest->new;
my $m = $t->mock('p');
my $h = $t->mock('h');

sub esc {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

$t->write_file('key-p', "sk-p\n");
$t->write_file('key-q', "sk-q\n");
$t->write_file('key-auth', "sk-auth~status=401\n");
$t->write_file('key-quota', 'sk-quota~status=429,body='
    . esc('{"error":{"message":"You exceeded your current quota",'
          . '"type":"insufficient_quota","code":"insufficient_quota"}}')
    . "\n");

$t->config(<<'EOF');
    omniroute_zone zone=omniroute:1m;

    omniroute_provider p url=http://127.0.0.1:%%PORT_mock_p%%/v1;
    omniroute_provider q url=http://127.0.0.1:%%PORT_mock_p%%/q;
    omniroute_provider a url=http://127.0.0.1:%%PORT_mock_h%%/a;
    omniroute_provider z url=http://127.0.0.1:%%PORT_mock_h%%/z;

    omniroute_connection cp provider=p key_file=%%TESTDIR%%/key-p;
    omniroute_connection cq provider=q key_file=%%TESTDIR%%/key-q;
    omniroute_connection ca provider=a key_file=%%TESTDIR%%/key-auth;
    omniroute_connection cz provider=z key_file=%%TESTDIR%%/key-quota;

    omniroute_combo both p/m q/m;
    omniroute_combo nowait wait=off p/m q/m;
    omniroute_combo hard a/m z/m;

    %%GATEWAY%%

    server {
        listen 127.0.0.1:%%PORT_api%%;

        location / {
            omniroute_api;
            omniroute_api_token env=OMNI_TEST_API_TOKEN;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub api {
    my ($method, $body) = @_;
    my $r = $t->http($t->port('api'), OmniTest::request_text($method,
        '/api/resilience', $body ? JSON::PP::encode_json($body) : undef,
        Authorization => "Bearer $TOKEN", 'Content-Type' => 'application/json'));
    return OmniTest::json($r);
}

sub ask {
    my ($model) = @_;
    my $t0 = time;
    my $r = $t->post($gw, '/v1/chat/completions', { model => $model });
    $r->{took} = time - $t0;
    return $r;
}

# after dispatch: both targets answer 429 with Retry-After: 2; the
# request waits for the earlier cooldown to end and tries again
$m->set_behavior('status=429,retry=2');
my $t0 = time;
my $s = $t->start_post($gw, '/v1/chat/completions', { model => 'both' });
sleep(0.5);
$m->set_behavior(undef);
my $r = OmniTest::finish($s, 10);
my $took = time - $t0;

is($r->{status}, 200, 'R-CONC-3 every attempt got a 429: 200 after a wait');
is($r->{headers}{'x-omniroute-attempts'}, '3',
   'R-CONC-3 two 429s, then the waited-for attempt');
ok($took > 1.8 && $took < 3.5, 'R-CONC-3 after the 2 s cooldown')
    or diag("took $took s");
is($r->{headers}{'x-omniroute-connection'}, 'cp',
   'R-CONC-3 the first target again, once it cooled down');
like($t->error_log, qr/every target of combo "both" is cooling down, waiting/,
     'the wait is logged');

# the first scenario's other 429 cooled its target about as long as the
# wait took: on a loaded machine it can still be cooling for a few ms, so
# wait (deadline) until the health view shows p and q with nothing cooling
sub cooling {
    my $r = $t->http($t->port('api'), OmniTest::request_text('GET',
        '/api/monitoring/health', undef, Authorization => "Bearer $TOKEN"));
    my $h = OmniTest::json($r) || {};
    return grep {
        my $p = $h->{providers}{$_} || {};
        ($p->{connections}{cooldown} // 1) > 0
            || ($p->{provider_cooldown_until} // 0) > ($h->{time} // 0);
    } qw(p q);
}
my $deadline = time + 5;
sleep(0.02) while cooling() && time < $deadline;
is(scalar(cooling()), 0, 'the first scenario\'s cooldowns ended');

# wait=off: the provider's own 429 after both attempts ...
$m->set_behavior('status=429,retry=2');
$r = ask('nowait');
is($r->{status}, 429, 'wait=off: the provider\'s 429');
like($r->{body}, qr/mock p error 429/, 'wait=off: its body');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'wait=off: no third attempt');

# ... and then, both cooling down: 429 at once, with retry_after
$r = ask('nowait');
my $doc = OmniTest::json($r) || {};
is($r->{status}, 429, 'R-CONC-3 waiting not allowed: 429 instead of 503');
is($doc->{error}{type}, 'rate_limit_error', 'R-CONC-3 rate_limit_error');
is($doc->{error}{code}, 'all_targets_rate_limited',
   'R-CONC-3 code all_targets_rate_limited');
ok($doc->{error}{retry_after} >= 1 && $doc->{error}{retry_after} <= 2,
   'R-CONC-3 retry_after: the earliest transient expiry')
    or diag($r->{body});
my $reset = ($doc->{error}{reset_at} // 0) / 1000 - time;
ok($reset > 0 && $reset <= 2.5, 'R-CONC-3 reset_at: when it ends (ms)')
    or diag("reset in $reset s");
is($r->{headers}{'retry-after'}, $doc->{error}{retry_after},
   'R-CONC-3 and Retry-After');
is_deeply([sort map { $_->{reason} } @{$doc->{diagnostics}{excluded}}],
          ['provider_cooldown', 'provider_cooldown'],
          'R-CONC-3 with the diagnostics');
ok($r->{took} < 0.5, 'R-CONC-3 at once') or diag("took $r->{took} s");

# before dispatch: both still cooling down, the combo that may wait waits
$m->set_behavior(undef);
$m->clear;
$r = ask('both');
is($r->{status}, 200,
   'R-CONC-3 every target cooling down before dispatch: 200 after a wait');
is($r->{headers}{'x-omniroute-attempts'}, '1', 'R-CONC-3 with one attempt');
ok($r->{took} > 1 && $r->{took} < 3, 'R-CONC-3 once the cooldown ended')
    or diag("took $r->{took} s");
is(scalar @{$m->requests}, 1, 'the providers saw nothing while it waited');

# quota and auth are never waited for
$r = ask('hard');
is($r->{status}, 429, 'auth then quota: the quota error');
$r = ask('hard');
is($r->{status}, 503, 'R-CONC-3 auth and quota cooldowns: 503 as before');
is(OmniTest::json($r)->{error}{code}, 'all_targets_cooling_down',
   'R-CONC-3 code all_targets_cooling_down');
ok($r->{took} < 0.5, 'R-CONC-3 never waited for (the auth cooldown is 3 s)')
    or diag("took $r->{took} s");

# a client that goes away ends its wait: nothing is sent for it later
$m->set_behavior('status=429,retry=2');
ask('nowait');
$m->set_behavior(undef);
$m->clear;
$s = $t->start_post($gw, '/v1/chat/completions', { model => 'both' });
sleep(0.3);
close $s;
sleep(2.5);
is(scalar @{$m->requests}, 0,
   'R-CONC-3 the client went away while waiting: no attempt for it');
$r = ask('both');
is($r->{status}, 200, 'and the next request is served');

# the settings: defaults, and a runtime override that turns waiting off
my $g = api('GET')->{global};
is_deeply($g->{combo_wait}, { enabled => JSON::PP::true, max_wait_ms => 10000,
                              budget_ms => 30000 },
          'combo_wait settings: the defaults');
is($g->{sources}{combo_wait}{enabled}, 'default', 'from the defaults');

$g = api('PATCH', { global => { combo_wait => { enabled => JSON::PP::false } } })
    ->{global};
is($g->{sources}{combo_wait}{enabled}, 'runtime', 'PATCH: a runtime override');
$m->set_behavior('status=429,retry=2');
ask('nowait');
$m->set_behavior(undef);
$r = ask('both');
is(OmniTest::json($r)->{error}{code}, 'all_targets_rate_limited',
   'combo_wait.enabled false: 429 at once, no wait');
ok($r->{took} < 0.5, 'at once') or diag("took $r->{took} s");
api('PATCH', { global => { combo_wait => { enabled => undef } } });
$r = ask('both');
is($r->{status}, 200, 'the override removed: it waits again');

# a cooldown longer than combo_wait.max_wait_ms (10 s) is not waited for
$m->set_behavior('status=429,retry=20');
$r = ask('both');
is($r->{status}, 429, 'Retry-After 20: the provider\'s 429');
is($r->{headers}{'x-omniroute-attempts'}, '2', 'after the two attempts');
ok($r->{took} < 1, 'R-CONC-3 no wait beyond max_wait') or diag("took $r->{took} s");
$r = ask('both');
$doc = OmniTest::json($r) || {};
is($doc->{error}{code}, 'all_targets_rate_limited',
   'R-CONC-3 then 429 all_targets_rate_limited');
ok($doc->{error}{retry_after} >= 19 && $doc->{error}{retry_after} <= 20,
   'R-CONC-3 retry_after 20') or diag($r->{body});

$t->done;
done_testing;
